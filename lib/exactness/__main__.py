"""`python -m exactness ...` is the `exactness` command."""
from exactness.workbook.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
