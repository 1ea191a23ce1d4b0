"""grail-server as a child process of a bench script.

Every harness here starts the real server the same way: ports chosen by the kernel
(`--port 0`), the ports read back from `--ready-file` (which the server writes whole, by
rename, once it serves), its output in a log file, and SIGTERM to stop it.

    with ServerProcess(bin_dir, model, store, "--max-batch-size", "64", log=log) as server:
        ... f"127.0.0.1:{server.port}" ...
"""
import json
import os
import signal
import subprocess
import time


class ServerProcess:
    def __init__(self, bin_dir, model, data_dir, *flags, log, append=False, metrics=True,
                 env=None, start_seconds=600):
        """Starts grail-server and returns once it serves.

        flags: further command-line flags. log: the file its stdout and stderr go to, rewritten
        unless `append`.
        metrics: whether to serve /metrics (on a port of its own, `metrics_port`).
        Raises RuntimeError naming the log if it exits or is not serving after start_seconds.
        """
        self.log_path = str(log)
        self.ready_path = self.log_path + ".ready"
        if os.path.exists(self.ready_path):
            os.remove(self.ready_path)
        self._log = open(self.log_path, "a" if append else "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [os.path.join(str(bin_dir), "grail-server"), "--model", str(model), "--data-dir",
             str(data_dir), "--host", "127.0.0.1", "--port", "0", "--metrics-port",
             "0" if metrics else "-1", "--ready-file", self.ready_path, *map(str, flags)],
            stdout=self._log, stderr=subprocess.STDOUT, env=env)
        while not os.path.exists(self.ready_path):
            if self.proc.poll() is not None:
                self._log.close()
                raise RuntimeError(
                    f"grail-server exited with {self.proc.returncode}; see {self.log_path}")
            if time.monotonic() - self.started > start_seconds:
                self.stop()
                raise RuntimeError(f"grail-server did not serve within {start_seconds} s; "
                                   f"see {self.log_path}")
            time.sleep(0.02)
        self.seconds_to_ready = time.monotonic() - self.started
        with open(self.ready_path) as f:
            ready = json.load(f)
        self.port = ready["port"]
        self.metrics_port = ready.get("metrics_port")
        self.target = f"127.0.0.1:{self.port}"

    def stop(self, seconds=60):
        """SIGTERM (SIGKILL if it has not exited after `seconds`); returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def kill(self):
        """SIGKILL, as a crash: nothing is flushed or closed by the server."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
