"""Backends, one interface: where and how a job's command runs.

- `local`: this machine. On a TPU VM that is the TPU; elsewhere `PJRT_DEVICE=CPU` and
  `CPU_NUM_DEVICES=<chips>` make virtual XLA:CPU devices stand in for the chips.
- `ssh`: a remote TPU VM through the system's OpenSSH client and the user's ssh config. The
  commit travels as a git bundle over ssh's stdin, the probe as a tar file; output streams back.
- `gcloud`: `gcloud compute tpus tpu-vm ssh NAME --zone ZONE --worker=all --command ...`, files
  shipped with `gcloud compute tpus tpu-vm scp`.
- `skypilot`: `sky launch` (or `sky jobs launch` with option `mode = "jobs"`) of a task file
  whose `workdir` is the job's worktree.

Remote runs print their probe files after the command as `@@workbench-probe-file` lines; the
runner takes them out of the log and writes them to the job's probe folder, so probe files come
back over the output stream whatever the transport.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from domain.text import plural
from workbench.probe import INJECT_DIR


class Runner(Protocol):
    """Runs a harness command (copy, unpack, stop), its output into the job's runner log."""

    def __call__(self, argv: list[str], stdin: Path | None = None, timeout: float = 600) -> None: ...


@dataclass
class Context:
    """What a backend needs to know about one job's run."""

    job_id: int
    commit: str
    worktree: Path
    job_dir: Path
    argv: list[str]
    cwd: str
    env: dict[str, str]
    chips: int
    host: str | None
    zone: str | None
    options: dict[str, Any]

    @property
    def probe_dir(self) -> Path:
        return self.job_dir / "probe"

    @property
    def remote_dir(self) -> str:
        return self.options.get("remote_dir") or f".workbench-jobs/job-{self.job_id}-{self.commit[:12]}"


def has_tpu() -> bool:
    """A TPU VM shows its chips as /dev/accel* (v4, v5) or /dev/vfio devices (v5e/v6e)."""
    dev = Path("/dev")
    return any(dev.glob("accel*")) or (dev / "vfio").is_dir() and any((dev / "vfio").glob("[0-9]*"))


def default_env(backend: str, chips: int, options: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Environment a backend proposes for variables an attempt did not record: name -> (value,
    why), the why shown in the launcher next to a recorded value that differs."""
    if backend == "local" and not has_tpu():
        return {"PJRT_DEVICE": ("CPU", "this machine has no TPU: torch_xla runs on XLA:CPU"),
                "CPU_NUM_DEVICES": (str(chips), f"XLA:CPU devices stand in for the {plural(chips, 'chip')} asked for")}
    return {"PJRT_DEVICE": ("TPU", f"the {backend} backend runs on TPU")}


class Backend:
    name = ""

    def prepare(self, ctx: Context, run: Runner) -> None:
        """Ship the code and the probe; `run(argv, stdin=None)` runs a quiet harness command."""

    def main(self, ctx: Context) -> tuple[list[str], dict[str, str], Path]:
        """(argv, full environment, working directory) of the process to stream."""
        raise NotImplementedError

    def stop(self, ctx: Context) -> list[str] | None:
        """A command that stops the run on the remote side; None when killing our child is enough."""
        return None

    def cleanup(self, ctx: Context, run: Runner) -> None:
        """Remove what the job left remotely."""


def _path_with_venv(env: dict[str, str], venv: str | None) -> dict[str, str]:
    if venv:
        env["PATH"] = f"{Path(venv) / 'bin'}{os.pathsep}{env.get('PATH', os.defpath)}"
        env["VIRTUAL_ENV"] = str(venv)
    return env


def _pythonpath(extra: str, existing: str | None) -> str:
    return extra + (os.pathsep + existing if existing else "")


def local_environment(env: dict[str, str], options: dict[str, Any]) -> dict[str, str]:
    """What a local run's command sees, before the probe: this process's environment without its
    Python settings, the target venv first on PATH, the job's variables on top. The pre-flight
    checks with it too."""
    out = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "WORKBENCH_PROBE_DIR")}
    out = _path_with_venv(out, options.get("venv"))
    out.update(env)
    return out


class Local(Backend):
    name = "local"

    def main(self, ctx: Context) -> tuple[list[str], dict[str, str], Path]:
        env = local_environment(ctx.env, ctx.options)
        env["PYTHONPATH"] = _pythonpath(str(INJECT_DIR), ctx.env.get("PYTHONPATH"))
        env["WORKBENCH_PROBE_DIR"] = str(ctx.probe_dir)
        env["WORKBENCH_JOB_ID"] = str(ctx.job_id)
        return list(ctx.argv), env, ctx.worktree / ctx.cwd


# --------------------------------------------------------------------------- remote shells


def remote_script(ctx: Context, root: str) -> str:
    """The POSIX shell script a remote host runs: the command with the probe, then the probe files.

    `root` is the job's folder on the remote host (relative to the login directory).
    """
    exports = {**ctx.env}
    exports["PYTHONPATH"] = f"$HOME/{root}/inject" + (f":{ctx.env['PYTHONPATH']}" if ctx.env.get("PYTHONPATH") else "")
    exports["WORKBENCH_PROBE_DIR"] = f"$HOME/{root}/probe"
    exports["WORKBENCH_JOB_ID"] = str(ctx.job_id)
    lines = ["set -u"]
    venv = ctx.options.get("venv")
    if venv:
        lines.append(f"export PATH={shlex.quote(str(venv))}/bin:$PATH VIRTUAL_ENV={shlex.quote(str(venv))}")
    for key, value in sorted(exports.items()):
        if value.startswith("$HOME/"):
            lines.append(f'export {key}="$HOME"/{shlex.quote(value[6:])}')
        else:
            lines.append(f"export {key}={shlex.quote(value)}")
    lines.append(f'cd "$HOME"/{shlex.quote(root)}/src/{shlex.quote(ctx.cwd)} || exit 97')
    lines.append(f'sh -c \'echo $$ > "$HOME"/{shlex.quote(root)}/pid; exec "$@"\' run {shlex.join(ctx.argv)}')
    lines.append("rc=$?")
    lines.append(f'python3 "$HOME"/{shlex.quote(root)}/inject/handback.py "$HOME"/{shlex.quote(root)}/probe'
                 " 2>/dev/null || python \"$HOME\"/" + shlex.quote(root) + "/inject/handback.py \"$HOME\"/"
                 + shlex.quote(root) + "/probe")
    lines.append("exit $rc")
    return "\n".join(lines)


def _unpack(ctx: Context, root: str) -> str:
    q = shlex.quote(root)
    return (f'cd "$HOME"/{q} && mkdir -p inject probe && tar -x -C inject -f probe.tar'
            f" && rm -rf src && git clone -q code.bundle src && git -C src checkout -q --detach {shlex.quote(ctx.commit)}")


def _artifacts(ctx: Context) -> tuple[Path, Path]:
    """The commit as a git bundle and the probe as a tar file, in the job folder."""
    import tarfile

    from workbench.rerun.worktree import bundle

    code = bundle(ctx.worktree, ctx.job_dir / "code.bundle")
    tar = ctx.job_dir / "probe.tar"
    with tarfile.open(tar, "w") as out:
        for name in ("sitecustomize.py", "workbench_probe.py", "handback.py"):
            out.add(INJECT_DIR / name, arcname=name)
    return code, tar


class RemoteShell(Backend):
    """A backend that runs shell commands on the remote host (`ssh`): the job's folder there holds
    the checkout, the probe and the pid; the same run, stop and clean-up for every such backend."""

    def ssh(self, ctx: Context, command: str) -> list[str]:
        raise NotImplementedError

    def main(self, ctx: Context) -> tuple[list[str], dict[str, str], Path]:
        return self.ssh(ctx, remote_script(ctx, ctx.remote_dir)), dict(os.environ), ctx.job_dir

    def stop(self, ctx: Context) -> list[str] | None:
        q = shlex.quote(ctx.remote_dir)
        return self.ssh(ctx, f'kill -TERM $(cat "$HOME"/{q}/pid) 2>/dev/null; true')

    def cleanup(self, ctx: Context, run: Runner) -> None:
        run(self.ssh(ctx, f'rm -rf "$HOME"/{shlex.quote(ctx.remote_dir)}'))


class Ssh(RemoteShell):
    name = "ssh"

    def ssh(self, ctx: Context, command: str) -> list[str]:
        opts = list(ctx.options.get("ssh_options") or [])
        return [ctx.options.get("ssh", "ssh"), *opts, "-o", "BatchMode=yes", ctx.host or "", command]

    def prepare(self, ctx: Context, run: Runner) -> None:
        code, tar = _artifacts(ctx)
        root = ctx.remote_dir
        q = shlex.quote(root)
        run(self.ssh(ctx, f'mkdir -p "$HOME"/{q} && cat > "$HOME"/{q}/code.bundle'), stdin=code)
        run(self.ssh(ctx, f'cat > "$HOME"/{q}/probe.tar'), stdin=tar)
        run(self.ssh(ctx, _unpack(ctx, root)))


class Gcloud(RemoteShell):
    name = "gcloud"

    def _base(self, ctx: Context, verb: str) -> list[str]:
        argv = [ctx.options.get("gcloud", "gcloud"), "compute", "tpus", "tpu-vm", verb]
        return argv

    def _where(self, ctx: Context) -> list[str]:
        out = []
        if ctx.zone:
            out += ["--zone", ctx.zone]
        if ctx.options.get("project"):
            out += ["--project", str(ctx.options["project"])]
        return out + ["--worker=all"]

    def ssh(self, ctx: Context, command: str) -> list[str]:
        return [*self._base(ctx, "ssh"), ctx.host or "", *self._where(ctx), "--command", command]

    def prepare(self, ctx: Context, run: Runner) -> None:
        code, tar = _artifacts(ctx)
        q = shlex.quote(ctx.remote_dir)
        run(self.ssh(ctx, f'mkdir -p "$HOME"/{q}'))
        run([*self._base(ctx, "scp"), str(code), str(tar), f"{ctx.host}:{ctx.remote_dir}/", *self._where(ctx)])
        run(self.ssh(ctx, _unpack(ctx, ctx.remote_dir)))


class Skypilot(Backend):
    """`sky launch -c CLUSTER task.yaml` (a cluster kept for more jobs) or `sky jobs launch`."""

    name = "skypilot"

    def task(self, ctx: Context) -> dict[str, Any]:
        root = ".workbench-job"
        script = remote_script(ctx, root).replace(
            f'cd "$HOME"/{root}/src/', "cd ~/sky_workdir/"
        )
        accel = ctx.options.get("accelerators")
        task: dict[str, Any] = {
            "name": f"workbench-job-{ctx.job_id}",
            "workdir": str(ctx.worktree),
            "file_mounts": {f"~/{root}/inject": str(INJECT_DIR)},
            "setup": f"mkdir -p ~/{root}/probe",
            "run": script,
        }
        if accel:
            task["resources"] = {"accelerators": accel}
        if ctx.options.get("num_nodes"):
            task["num_nodes"] = int(ctx.options["num_nodes"])
        return task

    def main(self, ctx: Context) -> tuple[list[str], dict[str, str], Path]:
        path = ctx.job_dir / "task.yaml"
        path.write_text(json.dumps(self.task(ctx), indent=2) + "\n")  # JSON is YAML
        sky = ctx.options.get("sky", "sky")
        if ctx.options.get("mode") == "jobs":
            argv = [sky, "jobs", "launch", "-y", "-n", f"workbench-job-{ctx.job_id}", str(path)]
        else:
            argv = [sky, "launch", "-y", "-c", ctx.host or f"workbench-{ctx.job_id}", str(path)]
        return argv, dict(os.environ), ctx.job_dir

    def stop(self, ctx: Context) -> list[str] | None:
        sky = ctx.options.get("sky", "sky")
        if ctx.options.get("mode") == "jobs":
            return [sky, "jobs", "cancel", "-y", "-n", f"workbench-job-{ctx.job_id}"]
        return [sky, "cancel", "-y", ctx.host or f"workbench-{ctx.job_id}", "--all"]

    def cleanup(self, ctx: Context, run: Runner) -> None:
        if ctx.options.get("down") and ctx.options.get("mode") != "jobs":
            run([ctx.options.get("sky", "sky"), "down", "-y", ctx.host or f"workbench-{ctx.job_id}"])


BACKENDS: dict[str, type[Backend]] = {b.name: b for b in (Local, Ssh, Gcloud, Skypilot)}


def get(name: str) -> Backend:
    return BACKENDS[name]()


def quiet_runner(log: Path) -> Runner:
    """`run(argv, stdin=None)` for harness commands: output to the job's runner log, errors raised."""
    from domain.errors import WorkbenchError

    def run(argv: list[str], stdin: Path | None = None, timeout: float = 600) -> None:
        with open(log, "ab") as out:
            out.write(("$ " + shlex.join(argv)[:400] + "\n").encode())
            out.flush()
            with open(stdin or os.devnull, "rb") as fh:
                done = subprocess.run(argv, stdin=fh, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
        if done.returncode != 0:
            raise WorkbenchError(f"{argv[0]} failed with status {done.returncode} (see {log})")

    return run
