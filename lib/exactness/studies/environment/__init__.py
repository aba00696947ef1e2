"""The machine and software a batch ran on, and how floats behave there."""
