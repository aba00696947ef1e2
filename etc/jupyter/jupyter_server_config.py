"""JupyterLab's server as `make lab` starts it (the Makefile puts this folder on JUPYTER_CONFIG_PATH, so a
user's own jupyter_server_config in .state/jupyter/config still loads, and wins).

- The token stays the user's: the Makefile keeps the runtime folder 0700 and starts the server under umask
  077, since jupyter_server writes jpserver-<pid>-open.html (the URL with the token) with the umask's mode.
- Checkpoints (File > Revert Notebook to Checkpoint) go beside the rest of Jupyter's state (.state/ under
  `make lab`), never into notebooks/.ipynb_checkpoints/ in the checkout.
- labconfig/page_config.json beside this file turns JupyterLab's news announcement off: a notebook opened
  from `make lab` shows the notebook, not a question about fetching news from the network.
- A study's notebook is served with the answers of the study's latest default run already shown, and with the
  kernel's language_info, so that Lab does not mark it unsaved the moment the kernel answers; saving takes both
  out again (`exactness.workbook.lab_notebooks`). `--StudyNotebooks.outputs=DIR` reads the runs from another
  outputs folder (the browser test's own).
- A browser page that goes away while its kernel is still starting (a reload, a closed tab, a screenshot
  taken too early) no longer makes the server log a 500: jupyter_server 2.21 clears the websocket
  handler's connection when the client leaves during the handshake, then reads it again to pick the
  subprotocol (jupyter-server/jupyter_server#1265, open). The connection below ends such a request
  itself, as "client closed request", before the handler gets there.
"""

import os

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection
from tornado import web
from traitlets import Unicode

from exactness.workbook import lab_notebooks
from exactness.workbook.project import Project

c = get_config()  # noqa: F821 (traitlets defines it for config files)

c.FileCheckpoints.checkpoint_dir = os.path.join(jupyter_data_dir(), "checkpoints")


class KernelConnection(ZMQChannelsWebsocketConnection):
    """The default kernel websocket connection, ending the request quietly when the page left while the
    kernel was still starting (the handshake waits for the kernel's first reply)."""

    async def prepare(self):
        await super().prepare()
        handler = self.websocket_handler
        if handler.connection is not self:  # its on_close ran: the client is gone
            self.log.info("Kernel %s: the page closed its connection before the kernel answered",
                          self.kernel_id)
            handler.set_status(499, "Client Closed Request")
            raise web.Finish()


c.ServerApp.kernel_websocket_connection_class = KernelConnection


class StudyNotebooks(AsyncLargeFileManager):
    """The default contents manager, serving and saving a study's notebook through `lab_notebooks`."""

    outputs = Unicode("", config=True, help="the outputs folder whose runs a notebook shows (default: the project's)")

    def _project(self) -> Project:
        return Project.at(outputs=self.outputs or None)

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if content and model.get("type") == "notebook" and isinstance(model.get("content"), dict):
            lab_notebooks.served(model["content"], path, self._project())
        return model

    async def save(self, model, path=""):
        if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
            lab_notebooks.for_saving(model["content"])
        return await super().save(model, path)


c.ServerApp.contents_manager_class = StudyNotebooks
