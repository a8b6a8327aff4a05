"""Cluster workers that start warm (issue 23): `cuabi cache warm MANIFEST`
on every Dask worker (a WorkerPlugin) or Ray worker process (a
worker_process_setup_hook) as it starts, with the outcome reported.

    from cuabi.workers import CacheWarmPlugin
    client.register_plugin(CacheWarmPlugin("kernels.toml"))
    client.get_events("cuabi-cache-warm")      # one report per worker

    ray.init(runtime_env={"worker_process_setup_hook": ray_setup_hook("kernels.toml")})

A warm compile cache is what makes the first task of each worker fast: the
kernels that tasks compile (or unpickle and load) hit the cache instead of
NVRTC. Kernels themselves travel by pickle (ObjectCode and Kernel pickle as
their compiled bytes, never as source). Imports nothing of cuabi: the tool
is run as a process, so a broken CUDA setup on a worker is reported, not
raised inside the worker's own process.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess

try:        # Dask's base class when distributed is installed; a plain class otherwise
    from distributed.diagnostics.plugin import WorkerPlugin as _WorkerPlugin
except ImportError:     # pragma: no cover - exercised where distributed is missing
    _WorkerPlugin = object

TOPIC = "cuabi-cache-warm"


def tool() -> str:
    """The `cuabi` command-line tool: $CUABI_TOOL, the one on PATH, or the
    one a wheel bundles (cuabi/bin/cuabi)."""
    env = os.environ.get("CUABI_TOOL")
    if env:
        return env
    found = shutil.which("cuabi")
    if found:
        return found
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "cuabi")


def warm(manifest, args=(), timeout: float = 3600, exe: str | None = None) -> dict:
    """Run `cuabi cache warm MANIFEST --json` here; the report as a dict:
    host, pid, returncode, ok, and the tool's JSON summary (or its stderr)."""
    cmd = [exe or tool(), "cache", "warm", os.fspath(manifest), "--json", *args]
    report = {"host": socket.gethostname(), "pid": os.getpid(), "manifest": os.fspath(manifest),
              "command": cmd}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        report.update(returncode=None, ok=False, error=str(e))
        return report
    report["returncode"] = r.returncode
    report["ok"] = r.returncode == 0
    try:
        report["summary"] = json.loads(r.stdout) if r.stdout.strip() else None
    except ValueError:
        report["summary"] = None
        report["stdout"] = r.stdout[-4000:]
    if r.returncode != 0:
        report["error"] = r.stderr[-4000:]
    return report


class CacheWarmPlugin(_WorkerPlugin):
    """A Dask WorkerPlugin: warms the worker's compile cache from `manifest`
    (a path every worker can read) when the worker starts or the plugin is
    registered. The report goes to the scheduler's event log under
    "cuabi-cache-warm" (client.get_events); a failed warm-up fails the
    plugin's setup (register_plugin names the worker) unless strict=False."""

    name = "cuabi-cache-warm"

    def __init__(self, manifest, args=(), strict: bool = True, timeout: float = 3600,
                 exe: str | None = None):
        self.manifest = os.fspath(manifest)
        self.args = tuple(args)
        self.strict = strict
        self.timeout = timeout
        self.exe = exe
        self.report = None

    def setup(self, worker=None):
        self.report = warm(self.manifest, self.args, self.timeout, self.exe)
        if worker is not None:
            self.report["worker"] = getattr(worker, "address", None)
            try:
                worker.log_event(TOPIC, self.report)
            except Exception:       # noqa: BLE001 - reporting must not fail the setup
                pass
        if self.strict and not self.report["ok"]:
            raise RuntimeError(f"cuabi cache warm {self.manifest} failed on "
                               f"{self.report['host']}: {self.report.get('error', '')}")


def ray_setup_hook(manifest, args=(), strict: bool = True, timeout: float = 3600,
                   exe: str | None = None):
    """A function for Ray's runtime_env={"worker_process_setup_hook": ...}:
    each Ray worker process warms its cache from `manifest` as it starts
    (the report printed to the worker's log, the error raised when strict)."""
    manifest = os.fspath(manifest)

    def hook():
        report = warm(manifest, args, timeout, exe)
        print(f"{TOPIC}: {json.dumps(report)}", flush=True)
        if strict and not report["ok"]:
            raise RuntimeError(f"cuabi cache warm {manifest} failed on {report['host']}: "
                               f"{report.get('error', '')}")
        return report
    return hook
