"""A cap on what one cell of a run writes into its notebook: a builder that prints megabytes per call would
otherwise make the executed notebook and report.html hundreds of megabytes. Past `LIMIT` characters on stdout or
stderr in one cell, the cell says so once and the rest goes to the run folder's kernel.log.

Applied where the notebook client receives the kernel's output (papermill's client, as the `exactness` engine
runs it), so output of every kind is capped alike: the kernel's prints, its native libraries', its workers'."""

from __future__ import annotations

from pathlib import Path

from papermill.engines import NBClientEngine, papermill_engines
from papermill.utils import merge_kwargs, remove_args

from exactness import compat

LIMIT = 1_000_000  # characters per stream and cell
ENGINE = "exactness"


class CappedClient(compat.papermill_client()):
    """papermill's client whose cells keep at most `limit` characters per stream; the rest goes to `overflow`."""

    def __init__(self, nb_man, overflow: Path, limit: int = LIMIT, **kwargs):
        super().__init__(nb_man, **kwargs)
        self.overflow, self.limit, self.written = Path(overflow), limit, {}

    def output(self, outs, msg, display_id, cell_index):
        if msg.get("msg_type") == "stream":
            content = msg["content"]
            name, text = content.get("name", "stdout"), content.get("text", "")
            before = self.written.get((cell_index, name), 0)
            room = self.limit - before
            self.written[(cell_index, name)] = before + len(text)
            if len(text) > room:
                with open(self.overflow, "a", encoding="utf-8", errors="replace") as sink:
                    sink.write(text[max(room, 0):])
                if name == "stderr" and self.stderr_file:  # the terminal's progress lines still reach it
                    self.stderr_file.write(text[max(room, 0):])
                if room < 0:  # said already in this cell
                    return None
                content["text"] = (text[:room] + f"\n[exactness: this cell wrote more than {self.limit:,} characters "
                                   f"to {name}; the rest is in {self.overflow.name}]\n")
        return super().output(outs, msg, display_id, cell_index)


class CappedEngine(NBClientEngine):
    """papermill's nbclient engine with `CappedClient`: `overflow` (a file) and `limit` are its own arguments."""

    @classmethod
    def execute_managed_notebook(cls, nb_man, kernel_name, log_output=False, stdout_file=None, stderr_file=None,
                                 start_timeout=60, execution_timeout=None, overflow=None, limit=LIMIT, **kwargs):
        kwargs = remove_args(["input_path"], **kwargs)
        safe_kwargs = remove_args(["timeout", "startup_timeout"], **kwargs)
        final_kwargs = merge_kwargs(safe_kwargs, timeout=execution_timeout or kwargs.get("timeout"),
                                    startup_timeout=start_timeout, kernel_name=kernel_name, log_output=log_output,
                                    stdout_file=stdout_file, stderr_file=stderr_file)
        return CappedClient(nb_man, overflow, limit, **final_kwargs).execute()


papermill_engines.register(ENGINE, CappedEngine)
