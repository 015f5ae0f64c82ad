"""Fixtures of the browser suite: a JupyterLab server on 127.0.0.1, Debian's Chromium via Playwright,
a scripted model server for each test, and helpers to drive notebooks.

Run it on its own: ``pytest -m browser`` (``make test-browser``). TOOLCHAIN.md §5 and §8 explain the
driving pattern: wait for the kernel through ``window.jupyterapp`` and never hand a command's
promise back to Playwright.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ..support.stub_server import Reply, StubServer

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("IPYAGENT_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = ROOT / "build" / "screenshots"
TOKEN = "browser-test"
NOTEBOOKS = ("quickstart", "tools")

WAIT_KERNEL_JS = """async () => {
  const app = window.jupyterapp;
  const deadline = Date.now() + 60000;
  let panel = app.shell.currentWidget;
  while (!(panel && panel.sessionContext) && Date.now() < deadline) {
    await new Promise(r => setTimeout(r, 100));
    panel = app.shell.currentWidget;
  }
  await panel.context.ready;
  await panel.sessionContext.ready;
  while (Date.now() < deadline) {
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    if (kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle') return true;
    await new Promise(r => setTimeout(r, 100));
  }
  return false;
}"""


def pytest_collection_modifyitems(config, items):
    if not os.access(CHROMIUM, os.X_OK):
        skip = pytest.mark.skip(reason=f"no Chromium at {CHROMIUM}: apt-get install chromium (make test-browser does)")
        for item in items:
            if item.get_closest_marker("browser"):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """Debian's Chromium, no Playwright browser download; flags for root and a closed network."""
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "headless": True,
            "args": ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync"]}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1100, "height": 900}}


#: Run by every kernel at its start: the model's base URL is the one of the test that started the kernel.
MODEL_URL_STARTUP = """import os, pathlib
_url = pathlib.Path(os.environ["IPYAGENT_TEST_MODEL_URL_FILE"])
if _url.exists():
    os.environ["OPENAI_BASE_URL"] = _url.read_text()
del os, pathlib, _url
"""


@pytest.fixture(scope="session")
def lab_home(tmp_path_factory) -> Path:
    """Jupyter and IPython state of the session's JupyterLab (a temporary folder)."""
    home = tmp_path_factory.mktemp("jhome")
    startup = home / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-model-url.py").write_text(MODEL_URL_STARTUP)
    return home


@pytest.fixture
def model_server(lab_home):
    """The model: a StubServer of this test's own (it scripts the replies with `script()`). A kernel
    reads its URL when it starts, so a kernel of an earlier test never reaches this test's server:
    every request it holds is this test's."""
    url_file = lab_home / "model_url"
    with StubServer(Reply()) as server:
        url_file.write_text(f"{server.url}/v1")
        try:
            yield server
        finally:
            url_file.unlink()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _installed_labextension() -> Path:
    """The ipyagent labextension JupyterLab will load, checked to be the one built from labextension/."""
    from jupyter_core.paths import jupyter_path

    built = ROOT / "src" / "ipyagent" / "labextension" / "package.json"
    found = next(
        (
            Path(p) / "ipyagent"
            for p in jupyter_path("labextensions")
            if (Path(p) / "ipyagent" / "package.json").exists()
        ),
        None,
    )
    if found is None:
        pytest.fail("the ipyagent labextension is not installed: run `make test-browser` (it builds and installs it)")
    if built.exists():
        want = json.loads(built.read_text())["jupyterlab"]["_build"]["load"]
        have = json.loads((found / "package.json").read_text())["jupyterlab"]["_build"]["load"]
        if want != have:
            pytest.fail(
                f"the installed labextension ({found}) is not the last build: run `make test-browser` to reinstall it"
            )
    return found


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory, lab_home):
    """JupyterLab on 127.0.0.1 serving a copy of notebooks/; kernels talk to the `model_server` of
    the test that started them.

    Yields (base URL, notebook folder). Jupyter and IPython state live in `lab_home`.
    """
    _installed_labextension()
    home = lab_home
    root = tmp_path_factory.mktemp("notebooks")
    for name in NOTEBOOKS:
        shutil.copy(ROOT / "notebooks" / f"{name}.ipynb", root)
    (home / "config" / "labconfig").mkdir(parents=True)
    # No "news" toast in screenshots (TOOLCHAIN.md §8, failure 10).
    (home / "config" / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    env = {**os.environ,
           "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_DATA_DIR": str(home / "data"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "IPYTHONDIR": str(home / "ipython"),
           "OPENAI_API_KEY": "sk-test-browser", "IPYAGENT_TEST_MODEL_URL_FILE": str(home / "model_url")}
    port = _free_port()
    log = open(home / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         f"--IdentityProvider.token={TOKEN}", "--allow-root", f"--ServerApp.root_dir={root}",
         "--LabApp.expose_app_in_browser=True", "--JupyterNotebookApp.expose_app_in_browser=True",
         "--LabApp.news_url=None"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("JupyterLab did not start:\n" + (home / "server.log").read_text()[-3000:])
        time.sleep(0.2)
    try:
        yield url, root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def api(url: str, method: str, path: str) -> object:
    """Call the Jupyter server's REST API."""
    request = urllib.request.Request(f"{url}{path}", method=method, headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as r:
        body = r.read()
    return json.loads(body) if body else None


class Lab:
    """A page of JupyterLab with one notebook open."""

    def __init__(self, page, url: str, root: Path) -> None:
        self.page, self.url, self.root = page, url, root
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def open(self, name: str, *, wait_kernel: bool = True) -> None:
        # ?reset: a fresh workspace, so notebooks of earlier tests are not reopened beside this one.
        self.page.goto(f"{self.url}/lab/tree/{name}?reset&token={TOKEN}")
        self.page.wait_for_function(
            "(name) => window.jupyterapp !== undefined && window.jupyterapp.shell.currentWidget"
            " && window.jupyterapp.shell.currentWidget.context && window.jupyterapp.shell.currentWidget.context.path "
            "=== name",
            arg=name,
            timeout=60000,
        )
        self.panel = "#" + self.page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
        self.page.locator(f"{self.panel} .jp-Notebook .jp-Cell").first.wait_for(timeout=60000)
        if wait_kernel:
            assert self.page.evaluate(WAIT_KERNEL_JS), "the kernel did not become idle"

    def command(self, name: str) -> None:
        # Not returning the promise: Playwright would wait on it forever (TOOLCHAIN.md §8, failure 6).
        self.page.evaluate(f"() => {{ window.jupyterapp.commands.execute({json.dumps(name)}); }}")

    def cell(self, index: int):
        return self.page.locator(f"{self.panel} .jp-Notebook .jp-Cell").nth(index)

    def save(self, name: str) -> None:
        """Save the notebook and wait until it is on disk."""
        before = (self.root / name).stat().st_mtime
        self.command("docmanager:save")
        deadline = time.monotonic() + 20
        while (self.root / name).stat().st_mtime == before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (self.root / name).stat().st_mtime != before, "the notebook was not saved"

    def save_and_shutdown(self, name: str) -> None:
        """Save the notebook, wait until it is on disk, and shut its kernel down."""
        self.save(name)
        deadline = time.monotonic() + 30
        while True:  # a kernel JupyterLab was still starting (a restart, a late session) is shut down too
            for session in api(self.url, "GET", "/api/sessions"):  # type: ignore[union-attr]
                if session["path"].endswith(name):
                    api(self.url, "DELETE", f"/api/sessions/{session['id']}")
            kernels = api(self.url, "GET", "/api/kernels")
            if not kernels or time.monotonic() > deadline:
                break
            for kernel in kernels:  # type: ignore[union-attr]
                with contextlib.suppress(urllib.error.HTTPError):  # gone meanwhile
                    api(self.url, "DELETE", f"/api/kernels/{kernel['id']}")
            time.sleep(0.2)
        assert not kernels, "a kernel is still running"

    def screenshot(self, locator, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / name
        locator.screenshot(path=str(path))
        return path


@pytest.fixture
def lab(page, lab_server, model_server):
    """JupyterLab's page; every kernel started in the test talks to its `model_server`, and is shut
    down at its end (before the server stops)."""
    url, root = lab_server
    page.set_default_timeout(60000)
    yield Lab(page, url, root)
    for session in api(url, "GET", "/api/sessions"):  # type: ignore[union-attr]
        api(url, "DELETE", f"/api/sessions/{session['id']}")
