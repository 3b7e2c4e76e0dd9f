"""A real Milvus standalone server for tests and benchmarks, from PyPI's `milvus` package
(`milvus run standalone`, 2.3.x), on loopback only.

Every component's address is pinned to 127.0.0.1 (left empty, Milvus registers the machine's
first non-loopback address and its parts talk over it), and every port is a fresh one the
kernel hands out, so a restart after kill -9 never waits for a port still in TIME_WAIT.

    server = LocalMilvus(folder, auth=False).start()
    server.uri            # http://127.0.0.1:PORT
    server.kill()         # kill -9, the data folder stays
    server.start()        # the same data, new ports (server.uri changes)
    server.stop()
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request

COMPONENTS = ("rootCoord", "proxy", "queryCoord", "queryNode", "indexCoord", "indexNode",
              "dataCoord", "dataNode")
PORT_KEYS = ("etcd_port", "root_coord_port", "proxy_port", "proxy_internal_port",
             "query_coord_port", "query_node_port", "index_coord_port", "index_node_port",
             "data_coord_port", "data_node_port")
ROOT_TOKEN = "root:Milvus"      # the server's built-in superuser when authorization is on
START_TIMEOUT = 180.0


def why_cannot_run() -> str | None:
    """None when the `milvus` package can start a server here, else the reason."""
    try:
        import milvus  # noqa: F401
    except ImportError:
        return "PyPI's `milvus` package is not installed (pip install milvus)"
    import platform
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"PyPI's `milvus` package ships Linux x86-64 binaries only ({platform.platform()})"
    return None


def _free_ports(n: int) -> list[int]:
    """n distinct ports nothing listens on (the kernel's choice, so never a recent one)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class LocalMilvus:
    def __init__(self, folder, *, auth: bool = False):
        self.folder = os.path.abspath(str(folder))
        self.auth = auth
        self.proc: subprocess.Popen | None = None
        self.port = None
        self.web_port = None
        self._server = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def version(self) -> str:
        import milvus
        return milvus.__version__

    def _etcd_config(self) -> str:
        """The embedded etcd's own config: its client and peer ports (2379/2380 by default,
        which two servers on one machine would share) on loopback, kept across restarts."""
        path = os.path.join(self.folder, "configs", "etcd.yaml")
        if not os.path.exists(path):
            client, peer = _free_ports(2)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(f"name: default\n"
                        f"listen-client-urls: http://127.0.0.1:{client}\n"
                        f"advertise-client-urls: http://127.0.0.1:{client}\n"
                        f"listen-peer-urls: http://127.0.0.1:{peer}\n"
                        f"initial-advertise-peer-urls: http://127.0.0.1:{peer}\n"
                        f"initial-cluster: default=http://127.0.0.1:{peer}\n")
        with open(path, encoding="utf-8") as f:
            client = f.read().split("listen-client-urls: http://127.0.0.1:")[1].split()[0]
        return path, int(client)

    def _configure(self):
        from milvus import MilvusServer, MilvusServerConfig
        etcd_config, etcd_port = self._etcd_config()

        class Config(MilvusServerConfig):
            def update_extra_configs(self, content):
                # etcd.config.path is not in the package's template: add it under etcd.
                content = super().update_extra_configs(content)
                return content.replace("\netcd:\n", f"\netcd:\n  config:\n    path: {etcd_config}\n", 1)

        keys = PORT_KEYS[1:]
        ports = _free_ports(len(keys) + 1)
        cfg = Config(data_dir=self.folder, **dict(zip(keys, ports)))
        cfg.resolve_storage()
        cfg.set("authorization_enabled", bool(self.auth))
        for comp in COMPONENTS:
            cfg.set(f"{comp}.ip", "127.0.0.1")
        cfg.set("etcd.endpoints", f"127.0.0.1:{etcd_port}")
        cfg.set("minio.address", "127.0.0.1")
        cfg.set("common.session.ttl", 10)   # a restart waits for the old sessions to expire
        # Load and flush poll once a second by default: tests create many small collections.
        cfg.set("queryCoord.checkInterval", 200)
        cfg.set("queryCoord.distPullInterval", 100)
        server = MilvusServer(cfg, wait_for_started=False)
        server.webservice_port = ports[-1]
        self.port = ports[keys.index("proxy_port")]
        return server

    def start(self) -> LocalMilvus:
        """Start (or restart after kill/stop) on the same data folder; waits until healthy."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        self._server = self._configure()
        self._server.start()
        self.proc = self._server.server_proc
        self.web_port = self._server.webservice_port
        self._wait_healthy()
        return self

    def _wait_healthy(self):
        url = f"http://127.0.0.1:{self.web_port}/healthz"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Milvus server exited with {self.proc.returncode}; "
                                   f"see {self.folder}/logs/milvus-stderr.log")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if b"OK" in resp.read():
                        self._wait_serving()
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"the Milvus server did not start in {START_TIMEOUT:.0f} s")

    def _wait_serving(self):
        """healthz is OK before the proxy answers calls: wait for a real call."""
        from pymilvus import MilvusClient
        deadline = time.monotonic() + 60
        while True:
            try:
                c = MilvusClient(uri=self.uri, token=ROOT_TOKEN if self.auth else "", timeout=5)
                c.list_collections()
                c.close()
                return
            except Exception:   # noqa: BLE001  (not ready yet)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def kill(self) -> None:
        """kill -9 the server (the data folder stays as the crash left it)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._close_logs()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_logs()

    def _close_logs(self):
        if self._server is not None:
            for fd in self._server.proc_fds.values():
                fd.close()
            self._server.proc_fds.clear()
            self._server.server_proc = None


if __name__ == "__main__":      # a local server to try the team setup: see docs/scale-out.md
    import sys
    args = [a for a in sys.argv[1:] if a != "--auth"]
    server = LocalMilvus(args[0] if args else "milvus-local", auth="--auth" in sys.argv)
    server.start()
    signal.signal(signal.SIGTERM, lambda *_: (server.stop(), sys.exit(0)))
    print(f"Milvus {server.version} at {server.uri} (data in {server.folder}"
          f"{', token ' + ROOT_TOKEN if server.auth else ''}); Ctrl-C stops it", flush=True)
    try:
        server.proc.wait()
    except KeyboardInterrupt:
        server.stop()
