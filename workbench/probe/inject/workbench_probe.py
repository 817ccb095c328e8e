"""The workbench probe: per-step evidence from inside a training process, without touching its code.

Loaded by the `sitecustomize.py` beside it when that folder is on PYTHONPATH and
WORKBENCH_PROBE_DIR names a writable folder. Standard library only at import; it hooks torch
when (and only when) the program imports torch, and torch_xla only if the program imports it.

Per optimizer step it keeps, on the device, the loss (the scalar tensor `backward()` was called
on; the mean when several were, as with one replica per device), the global norm of the
gradients the optimizer is about to apply, and the host time since the previous step. Nothing
is read back to the host inside a step: values are fetched in batches of older, already
executed steps and at exit. Alongside it keeps a trace of what the program never prints: the
learning rate per param group, a parameter checksum and the input's fingerprint on sampled
steps (REPLICA_EVERY), the input batch's size, the modules' training flag (training and evaluation phases apart),
host reads, compilations and executions per step and per phase from torch_xla's counters, the
parameters' dtype and device, the first non-finite loss or gradient norm, and the runtime the
program imported. A program that updates its weights by hand (no torch.optim optimizer) has its
steps counted from its backward calls. At exit it writes one JSON file per process into
WORKBENCH_PROBE_DIR and prints one `workbench-probe {json}` summary line to stderr (the line the
verifier's log scan reads). A failure inside the probe is recorded in the report, never raised
into the program.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import sys
import time

VERSION = 2
FLUSH_EVERY = 64
"""Fetch values to the host once this many steps are buffered (older steps only)."""
HOST_READS_EVERY = 16
"""torch_xla's counts (host reads, `.item()` calls, compiles, executions) are read on steps 1 to 3
and then every this many steps, each reading the mean per step since the one before: the host-read
metric builds its list of up to 1,000 samples (about 50-170 µs), and in a running program each
counter read costs about 5 µs (read every step: 0.4% of the bench's 10 ms step, all told)."""
REPLICA_EVERY = 25
"""The sampled steps: the parameter checksum (replicas that never sync drift apart), the input's
fingerprint and per-replica evidence (each clip's norm, each in-process replica's gradient norm
and parameter sum) on steps 1 to 3 and every this many steps. All on the same steps, since each
value the probe adds to a step's graph makes another graph to compile. Where one process
drives several devices, torch_xla.sync() runs only the default device's pending graph, so what the
probe keeps on the others is launched on each device at the step (about 1.2 ms a device on the
bench: every 10th step cost 5% of its step time, every step +60%)."""
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "all_to_all", "all_to_all_single", "broadcast", "collective_permute")
"""torch.distributed's and torch_xla's collective operations the trace counts per step."""
RUNTIMES = ("torch_tpu", "torchax", "torch_xla")
"""Accelerator runtimes the trace names, first found wins; else plain `torch`."""


class _State:
    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self.pid = os.getpid()
        self.started = time.time()
        self.optimizer_id: int | None = None
        self.other_optimizer_steps = 0
        self.step = 0
        self.pending: list = []            # detached loss tensors since the last optimizer step
        self.buffer: list = []             # (step, losses, norms, step_time) not yet fetched
        self.losses: dict[int, float] = {}
        self.loss_counts: dict[int, int] = {}
        self.grad_norms: dict[int, float] = {}
        self.step_times: dict[int, float] = {}
        self.devices: set[str] = set()
        self.last_time: float | None = None
        self.errors: list[str] = []
        self.exit_registered_late = False
        self.written = False
        self.fetches = 0
        self.trailing_backward_calls = 0
        self.lrs: dict[int, list[float]] = {}
        self.last_lrs: list | None = None
        self.checksums: dict[int, float] = {}
        self.batch_fingerprints: dict[int, float] = {}
        self.batch_sizes: dict[int, int] = {}
        self.batch_pending = None          # (size, fingerprint tensor) of this step's first training forward
        self.param_dtypes: set[str] = set()
        self.param_devices: set[str] = set()
        self.input_devices: set[str] = set()
        self.training: bool | None = None  # the phase of the last forward
        self.phases = {"train": _phase(), "eval": _phase()}
        self.eval_entries = 0
        self.counters: tuple[int, dict[str, int]] | None = None   # (step, torch_xla's counters) last read
        self.phase_counters: dict[str, int] | None = None
        self.per_step: dict[str, dict[int, float]] = {"host_reads": {}, "item_calls": {}, "compiles": {},
                                                      "executions": {}, "collectives": {}}
        self.own_reads = 0                 # host reads the probe itself made (its batched fetches)
        self.step_source = "optimizer"
        self.backward_steps: list | None = []   # (loss, time) per backward while no optimizer has stepped
        self.bw_losses: dict[int, float] = {}
        self.bw_times: list[float] = []
        self.dropped_pending = 0
        self.dist: tuple[int, int] | None = None   # torch.distributed's world size and rank while training
        self.optimizers_made = 0           # torch.optim optimizers constructed: made but never stepped is a fault
        self.fwd_modules: list = []        # modules forwarded in training since the last backward
        self.bw_groups: list = []          # their lists, one a backward call, since the last optimizer step
        self.clips: list = []              # (device, norm before clipping, max_norm, before any reduction)
        self.collectives: dict[str, int] = {}   # collective operations by name, the whole run
        self.step_collectives = 0          # collectives since the last optimizer step
        self.reducers: set[str] = set()    # what reduces gradients: DDP's reducer, xm.reduce_gradients
        self.pre_reduce: object = None     # this step's gradient norm at its first collective (multi-process)
        self.first_optimizer = None        # the first optimizer built (its params: the pre-reduce norm)
        self.input_shardings: dict[str, int] = {}   # SPMD sharding spec of each step's first input: steps
        self.clip_norms: dict[int, list] = {}      # step -> [device, norm before clipping, max_norm, before reduce]
        self.replica_norms: dict[int, dict[str, float]] = {}       # step -> device -> gradient norm
        self.replica_checksums: dict[int, dict[str, float]] = {}   # step -> device -> parameter sum
        self.pre_reduce_norms: dict[int, float] = {}

    def error(self, where: str, exc: BaseException) -> None:
        if len(self.errors) < 20:
            self.errors.append(f"{where}: {type(exc).__name__}: {exc}")


def _phase() -> dict[str, int]:
    return {"forwards": 0, "compiles": 0, "executions": 0, "host_reads": 0, "item_calls": 0}


_state: _State | None = None


# --------------------------------------------------------------------------- hooks


def _late_exit_hook() -> None:
    """Run our exit handler before torch_xla's (atexit runs the last registered first)."""
    if _state is not None and not _state.exit_registered_late:
        _state.exit_registered_late = True
        atexit.unregister(_at_exit)
        atexit.register(_at_exit)


def _on_backward(tensors) -> None:
    s = _state
    if s is None:
        return
    try:
        torch = sys.modules["torch"]
        for t in (tensors,) if isinstance(tensors, torch.Tensor) else tensors:
            if isinstance(t, torch.Tensor) and t.numel() == 1:
                loss = t.data   # out of autograd like detach(), at a quarter of its cost on XLA
                if s.last_time is None:
                    s.last_time = time.perf_counter()
                s.pending.append(loss)
                if _sampled(s.step + 1):
                    s.devices.add(str(t.device))
                if s.fwd_modules:
                    s.bw_groups.append(s.fwd_modules)
                    s.fwd_modules = []
                    if len(s.bw_groups) > FLUSH_EVERY:   # no optimizer step yet: keep the latest
                        del s.bw_groups[:-8]
                if s.backward_steps is not None and s.optimizer_id is None:
                    s.backward_steps.append((loss, time.perf_counter()))
                    if len(s.backward_steps) > 4 * FLUSH_EVERY:   # no optimizer after this many: keep few
                        _flush_backward_steps(s, keep_last=1)
        _late_exit_hook()
    except Exception as exc:  # never break the program
        s.error("backward", exc)


def _on_forward(module, args) -> None:
    """The modules' training flag (phases apart) and the first training input of each step."""
    s = _state
    if s is None:
        return
    try:
        training = module.training
        if training is not s.training:
            _switch_phase(s, bool(training))
        if not training:
            s.phases["eval"]["forwards"] += 1
            return
        s.phases["train"]["forwards"] += 1
        if _sampled(s.step + 1):   # the modules of each backward, for the replicas' evidence on sampled steps
            s.fwd_modules.append(module)
            if len(s.fwd_modules) > 4096:   # training forwards without backward: keep the latest
                del s.fwd_modules[:-1024]
        if s.batch_pending is None:   # the step's first forward: the outermost module's
            if type(module).__name__ == "DistributedDataParallel":
                s.reducers.add("DistributedDataParallel")
            _note_batch(s, args)
    except Exception as exc:
        s.error("forward", exc)


def _note_batch(s: _State, args) -> None:
    """A step's first training input: its size; on sampled steps, a fingerprint (its sum, kept on
    the device) and its SPMD sharding."""
    torch = sys.modules["torch"]
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if first is None:
        return
    size = int(first.shape[0]) if first.dim() else 1
    if not _sampled(s.step + 1):
        s.batch_pending = (size, None)
        return
    s.input_devices.add(first.device.type)
    with torch.no_grad():
        value = first.detach()
        s.batch_pending = (size, (value if value.is_floating_point() else value.float()).sum())
    if first.device.type == "xla" and len(s.input_shardings) < 8:
        _note_sharding(s, first)


def _switch_phase(s: _State, training: bool) -> None:
    counts = _xla_counters(s)
    if s.training is not None and counts is not None and s.phase_counters is not None:
        phase = s.phases["train" if s.training else "eval"]
        for key, value in counts.items():
            phase[key] += value - s.phase_counters[key]
    if not training:
        s.eval_entries += 1
    s.phase_counters = counts
    s.training = training


def _note_sharding(s: _State, tensor) -> None:
    """The SPMD sharding spec of a step's first input (no device sync): its tile shape's first
    dimension is the data-parallel degree."""
    import torch_xla

    spec = torch_xla._XLAC._get_xla_sharding_spec(tensor)
    if spec:
        s.input_shardings[spec] = s.input_shardings.get(spec, 0) + 1


def _data_parallel(spec: str) -> int | None:
    """`{devices=[2,1,1,2]0,1,2,3 last_tile_dim_replicate}` -> 2 (the batch split 2 ways); replicated -> 1."""
    if "replicated" in spec and "devices=[" not in spec:
        return 1
    head = spec.partition("devices=[")[2].partition("]")[0]
    try:
        return int(head.split(",")[0])
    except ValueError:
        return None


def _xla_counters(s: _State) -> dict[str, int] | None:
    """torch_xla's counts the trace needs (no device sync), host reads less the probe's own batched
    fetches; None without torch_xla. Read at phase switches and every HOST_READS_EVERY steps."""
    if "torch_xla" not in sys.modules:
        return None
    import torch_xla.debug.metrics as met

    def counter(name: str) -> int:
        return int(met.counter_value(name) or 0)

    return {"item_calls": counter("aten::_local_scalar_dense"), "compiles": counter("UncachedCompile"),
            "executions": counter("ExecuteComputation") + counter("ExecuteReplicated"),
            "host_reads": _transfers() - s.own_reads}


def _on_optimizer_step(optimizer, args, kwargs) -> None:
    s = _state
    if s is None:
        return
    try:
        if s.optimizer_id is None:
            s.optimizer_id = id(optimizer)
            s.backward_steps = None   # an optimizer steps: its steps are the steps
        if id(optimizer) != s.optimizer_id:
            s.other_optimizer_steps += 1
            return
        import torch

        now = time.perf_counter()
        s.step += 1
        step_time = None if s.last_time is None else now - s.last_time
        s.last_time = now
        _count_step(s)
        _record_lr(s, optimizer)
        params = [p for group in optimizer.param_groups for p in group["params"]]
        # the fingerprint's steps: one graph of the probe's own beside the program's
        extras = _checksums(s, torch, params) if _sampled(s.step) else []
        norms = _grad_norms(torch, params)
        if s.batch_pending is not None:
            s.batch_sizes[s.step] = s.batch_pending[0]
            if s.batch_pending[1] is not None:
                extras.append(("batch", s.batch_pending[1], None))
            s.batch_pending = None
        _replicas_at_step(s, optimizer, extras)
        s.buffer.append((s.step, s.pending, norms, step_time, extras))
        s.pending = []
        if len(s.buffer) > FLUSH_EVERY:
            _flush(s, keep_last=1)
        _late_exit_hook()
    except Exception as exc:
        s.error("optimizer_step", exc)


def _grad_norms(torch, params: list) -> list:
    """The global norm of the gradients the optimizer is about to apply, one per device (kept there)."""
    by_device: dict = {}
    for p in params:
        g = p.grad
        if g is not None and not g.is_sparse:
            by_device.setdefault(g.device, []).append(g)
    enabled = torch.is_grad_enabled()
    torch._C._set_grad_enabled(False)   # as no_grad() does, for a third of its cost in a step
    try:
        return [_total_norm(torch, grads) for grads in by_device.values()]
    finally:
        torch._C._set_grad_enabled(enabled)


def _total_norm(torch, tensors: list):
    """The L2 norm of the tensors together (float32, kept on their device): each tensor's norm in one
    call where torch has it (2.3 and later), then the norm of those."""
    try:
        norms = torch._foreach_norm(tensors, 2.0, dtype=torch.float32)
    except (AttributeError, TypeError):
        norms = [torch.linalg.vector_norm(t.detach(), 2.0, dtype=torch.float32) for t in tensors]
    return torch.linalg.vector_norm(torch.stack(norms), 2.0)


def _checksums(s: _State, torch, params: list) -> list:
    """A sampled step's parameter sums, one per device (kept there), with the parameters' dtypes and
    devices; and torch.distributed's world while it is up (programs tear it down before exit)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        s.dist = (dist.get_world_size(), dist.get_rank())
    by_device: dict = {}
    for p in params:
        by_device.setdefault(p.device, []).append(p)
        s.param_dtypes.add(str(p.dtype).replace("torch.", ""))
        if p.grad is not None:
            s.devices.add(str(p.device))
    s.param_devices.update(d.type for d in by_device)
    with torch.no_grad():
        return [("checksum", torch.stack([p.detach().sum(dtype=torch.float64 if p.device.type == "cpu"
                                                         else torch.float32) for p in ps]).sum(), None)
                for ps in by_device.values()]


def _count_step(s: _State) -> None:
    """torch_xla's counts while training (all of them in a program without modules), read on steps 1
    to 3 and every HOST_READS_EVERY steps, each reading the mean per step since the one before;
    collectives, every step."""
    s.per_step["collectives"][s.step] = s.step_collectives
    s.step_collectives = 0
    if not (s.step <= 3 or s.step % HOST_READS_EVERY == 0):
        return
    counts = _xla_counters(s)
    if counts is None:
        return
    if s.phase_counters is not None:   # training's alone: an evaluation's reads are not the steps'
        counts = {k: s.phases["train"][k] + (v - s.phase_counters[k] if s.training else 0) for k, v in counts.items()}
    last_step, before = s.counters or (0, dict.fromkeys(counts, 0))
    for key, value in counts.items():
        s.per_step[key][s.step] = (value - before[key]) / (s.step - last_step)
    s.counters = (s.step, counts)


def _replicas_at_step(s: _State, optimizer, extras: list) -> None:
    """Per-replica evidence of this step, kept on the device: each clip's norm before clipping;
    where one process drives several replicas (backward calls on several devices), each replica's
    gradient norm as the optimizer steps (before the gradients are reduced, after any clipping of
    its own) and its parameter sum; in a process of a multi-process world, the
    gradient norm at the step's first collective (before the reduction)."""
    start = len(extras)
    for device, norm, max_norm, before in s.clips:
        extras.append(("clip", norm, (device, max_norm, before)))
    s.clips = []
    try:
        _replica_norms(s, optimizer, extras)
    finally:
        _launch(extras[start:])


def _launch(extras: list) -> None:
    """Start computing the kept values on each XLA device now, without waiting: torch_xla.sync()
    runs only the default device's graph, and values left pending on the others would be
    computed at the batched fetch in one new graph each time (a compile each: 1.5 s in 300 steps
    on the bench). A step's graph is the same each time: compiled once per device."""
    by_device: dict = {}
    for _, tensor, _ in extras:
        if tensor.device.type == "xla":
            by_device.setdefault(str(tensor.device), []).append(tensor)
    if len(by_device) < 2:
        return
    import torch_xla

    for group in by_device.values():
        torch_xla._XLAC._xla_sync_multi(group, devices=[], wait=False, sync_xla_data=False)


def _replica_norms(s: _State, optimizer, extras: list) -> None:
    import torch

    if s.pre_reduce is not None:
        extras.append(("pre_reduce", s.pre_reduce, None))
        s.pre_reduce = None
    groups, s.bw_groups = s.bw_groups, []
    if len(groups) < 2 or not _sampled(s.step):
        return
    mine = {id(p) for g in optimizer.param_groups for p in g["params"]}
    by_device: dict = {}
    for modules in groups:
        for m in modules:
            for p in m._parameters.values():
                if p is not None and p.grad is not None and id(p) not in mine:
                    by_device.setdefault(p.device, {})[id(p)] = p
    if len(by_device) < 2:
        return
    with torch.no_grad():
        for device, params in by_device.items():
            grads = [p.grad.detach() for p in params.values()]
            extras.append(("replica_norm", _total_norm(torch, grads), str(device)))
            extras.append(("replica_checksum", torch.stack(
                [p.detach().sum(dtype=torch.float32) for p in params.values()]).sum(), str(device)))


def _sampled(step: int) -> bool:
    return step <= 3 or step % REPLICA_EVERY == 1


def _on_clip(parameters, total, max_norm) -> None:
    """A clip_grad_norm_ call: the norm it measured (kept on the device) and its bound."""
    s = _state
    if s is None or not _sampled(s.step + 1):
        return
    try:
        first = next(iter(parameters), None)
        device = str(first.device) if first is not None else "?"
        s.clips.append((device, total.detach(), float(max_norm), not (s.step_collectives or s.reducers)))
    except Exception as exc:
        s.error("clip", exc)


def _on_collective(name: str) -> None:
    """A collective call: counted; the first of a step in a multi-process world has the gradient
    norm it is about to reduce measured (on the device)."""
    s = _state
    if s is None:
        return
    try:
        first = not s.step_collectives
        if name.endswith("reduce_gradients"):   # a reducer: its all_reduce calls are the collectives
            s.reducers.add(name)
        else:
            s.collectives[name] = s.collectives.get(name, 0) + 1
            s.step_collectives += 1
        if first and s.pre_reduce is None and s.first_optimizer is not None:
            import torch

            grads = [p.grad.detach() for g in s.first_optimizer.param_groups for p in g["params"]
                     if p.grad is not None and not p.grad.is_sparse]
            if grads:
                with torch.no_grad():
                    s.pre_reduce = _total_norm(torch, grads)
    except Exception as exc:
        s.error("collective", exc)


def _record_lr(s: _State, optimizer) -> None:
    """Each param group's learning rate, kept where it changed (a host value: no sync)."""
    lrs = []
    for group in optimizer.param_groups:
        lr = group.get("lr")
        if type(lr) is float:
            lrs.append(lr)
        elif getattr(getattr(lr, "device", None), "type", "cpu") != "cpu":
            lrs.append(None)   # an XLA tensor: reading it would sync
        else:
            try:
                lrs.append(float(lr))
            except (TypeError, ValueError):
                lrs.append(None)
    if lrs != s.last_lrs:
        s.lrs[s.step] = s.last_lrs = lrs


def _to_host(tensors: list) -> list[float]:
    """One batched device-to-host transfer per XLA device; plain reads for the rest (one element each)."""
    by_device: dict = {}
    for t in tensors:
        by_device.setdefault(t.device, []).append(t)
    values: dict[int, float] = {}
    for device, group in by_device.items():
        read = group
        if device.type == "xla":
            import torch_xla

            torch_xla._XLAC._xla_sync_multi(group, devices=[], wait=True, sync_xla_data=False)
            read = torch_xla._XLAC._xla_get_cpu_tensors(group)
        for t, c in zip(group, read):
            values[id(t)] = float(c.item())
    return [values[id(t)] for t in tensors]


def _transfers() -> int:
    """torch_xla's device-to-host transfers so far (its metric's sample count); 0 without torch_xla."""
    if "torch_xla" not in sys.modules:
        return 0
    import torch_xla.debug.metrics as met

    data = met.metric_data("TransferFromDeviceTime")
    return int(data[0]) if data else 0


def _host_values(s: _State, tensors: list) -> list[float]:
    """`_to_host`, with the transfers it makes kept out of the program's host reads."""
    before = _transfers()
    values = _to_host(tensors)
    s.own_reads += _transfers() - before
    return values


def _flush(s: _State, keep_last: int = 0) -> None:
    """Fetch buffered steps (all but the last `keep_last`, whose graph may not have run yet)."""
    take = s.buffer[: len(s.buffer) - keep_last] if keep_last else s.buffer
    if not take:
        return
    s.buffer = s.buffer[len(take):]
    flat = [t for _, losses, norms, _, extras in take for t in (*losses, *norms, *(e[1] for e in extras))]
    values = iter(_host_values(s, flat)) if flat else iter(())
    s.fetches += 1
    for step, losses, norms, step_time, extras in take:
        lv = [next(values) for _ in losses]
        nv = [next(values) for _ in norms]
        if lv:
            s.losses[step] = sum(lv) / len(lv)
            s.loss_counts[step] = len(lv)
        if nv:
            s.grad_norms[step] = sum(v * v for v in nv) ** 0.5
        if step_time is not None:
            s.step_times[step] = step_time
        for name, _, meta in extras:
            value = next(values)
            if name == "checksum":
                s.checksums[step] = s.checksums.get(step, 0.0) + value
            elif name == "batch":
                s.batch_fingerprints[step] = value
            elif name == "clip":
                s.clip_norms.setdefault(step, []).append([meta[0], value, meta[1], meta[2]])
            elif name == "pre_reduce":
                s.pre_reduce_norms[step] = value
            else:
                getattr(s, name + "s").setdefault(step, {})[meta] = value


def _flush_backward_steps(s: _State, keep_last: int = 0) -> None:
    """A program without an optimizer: each backward call is a step (its loss and host time)."""
    steps = s.backward_steps or []
    take = steps[: len(steps) - keep_last] if keep_last else steps
    if not take:
        return
    s.backward_steps = steps[len(take):]
    s.dropped_pending += max(0, len(s.pending) - 1)   # the same losses: keep one for a late first step
    s.pending = s.pending[-1:]
    first = len(s.bw_losses) + 1
    for i, (value, (_, at)) in enumerate(zip(_host_values(s, [t for t, _ in take]), take)):
        s.bw_losses[first + i] = value
        s.bw_times.append(at)


# --------------------------------------------------------------------------- exit report


def _environment(s: _State) -> dict:
    info: dict = {"launcher_world_size": None, "launcher_rank": None}
    for key, name in (("WORLD_SIZE", "launcher_world_size"), ("RANK", "launcher_rank")):
        try:
            info[name] = int(os.environ[key]) if key in os.environ else None
        except ValueError:
            pass
    torch = sys.modules.get("torch")
    info.update(device_kind=None, global_device_count=None, world_size=None, rank=None, spmd=False)
    if "torch_xla" in sys.modules:
        try:
            import torch_xla.runtime as xr

            info["device_kind"] = xr.device_type()
            info["global_device_count"] = xr.global_runtime_device_count()
            info["world_size"] = xr.world_size()
            info["rank"] = xr.global_ordinal()
            info["spmd"] = bool(xr.is_spmd())
        except Exception as exc:
            s.error("runtime", exc)
        try:
            info["xla_metrics"] = _xla_metrics()
        except Exception as exc:
            s.error("metrics", exc)
    elif torch is not None:
        kinds = sorted({d.split(":")[0] for d in s.devices}) or ["cpu"]
        info["device_kind"] = "cuda" if "cuda" in kinds else kinds[0]
        try:
            info["global_device_count"] = torch.cuda.device_count() if "cuda" in kinds else 1
            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                info["world_size"], info["rank"] = dist.get_world_size(), dist.get_rank()
            elif s.dist is not None:
                info["world_size"], info["rank"] = s.dist
            else:
                info["world_size"], info["rank"] = 1, 0
            if (info["world_size"] or 1) > 1:   # one device a process at least: the world is the count
                info["global_device_count"] = max(info["global_device_count"] or 0, info["world_size"])
        except Exception as exc:
            s.error("runtime", exc)
    used = {d for d in s.devices if d.startswith("xla")} if "torch_xla" in sys.modules else set(s.devices)
    used = used or set(s.devices)
    info["devices_seen"] = sorted(used)
    info["devices_used"] = info["global_device_count"] if info["spmd"] else (len(used) or None)
    return info


def _xla_metrics() -> dict:
    import torch_xla.debug.metrics as met

    counters = {name: met.counter_value(name) for name in met.counter_names()}
    metrics = {}
    for name in met.metric_names():
        data = met.metric_data(name)
        if data:
            metrics[name] = {"samples": data[0], "accumulator": data[1]}
    def count(name):
        return counters.get(name) or 0
    compile_ = metrics.get("CompileTime", {})
    execute = metrics.get("ExecuteTime") or metrics.get("ExecuteReplicatedTime") or {}
    return {
        "compiles": compile_.get("samples", 0),
        "compile_seconds": compile_.get("accumulator", 0) / 1e9,
        "uncached_compiles": count("UncachedCompile"),
        "cached_compiles": count("CachedCompile"),
        "executions": execute.get("samples", 0),
        "execute_seconds": execute.get("accumulator", 0) / 1e9,
        "transfers_to_device": metrics.get("TransferToDeviceTime", {}).get("samples", 0),
        "transfers_from_device": metrics.get("TransferFromDeviceTime", {}).get("samples", 0),
        "fallbacks": {k: v for k, v in counters.items() if k.startswith("aten::") and v},
        "counters": counters,
        "metrics": metrics,
    }


def _runtime() -> dict:
    """The accelerator runtime the program imported (else plain torch), with versions."""
    torch = sys.modules.get("torch")
    name = next((n for n in RUNTIMES if n in sys.modules), "torch")
    module = sys.modules.get(name)
    return {"name": name, "version": getattr(module, "__version__", None),
            "torch_version": getattr(torch, "__version__", None)}


def _launcher() -> str:
    """What started this process: torchrun, torch_xla's spawn, MPI, or python itself."""
    if "TORCHELASTIC_RUN_ID" in os.environ:
        return "torchrun"
    if "torch_xla.distributed.xla_multiprocessing" in sys.modules:
        return "xmp.spawn"
    if "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ:
        return "mpirun"
    if "LOCAL_RANK" in os.environ:
        return "torch.distributed.launch"
    return "python"


def _norm(name: str) -> str:
    return "-".join(name.lower().replace("_", "-").replace(".", "-").split("-"))


def _ran_with() -> dict:
    """The run's own interpreter and packages (names normalised as pip does), and which of them the
    program imported: what explains a deviation that follows a library, not the hardware."""
    import importlib.metadata as md
    import platform

    packages = {}
    for dist in md.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            packages.setdefault(_norm(name), dist.version)
    imported = set()
    try:
        owners = md.packages_distributions()
        for module in list(sys.modules):
            top = module.partition(".")[0]
            if top in sys.stdlib_module_names or top.startswith("_") or top in ("workbench_probe", "sitecustomize"):
                continue
            imported.update(_norm(d) for d in owners.get(top, ()))
    except Exception:
        pass
    return {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(terse=True), "launcher": _launcher(),
            "packages": dict(sorted(packages.items())), "imported": sorted(imported & set(packages))}


def _first_non_finite(values: dict[int, float]) -> int | None:
    return next((step for step, v in sorted(values.items()) if v != v or v in (float("inf"), float("-inf"))), None)


def _trace(s: _State) -> dict:
    """The training trace: what the program never prints (docs/rerun.md lists each field)."""
    if s.step == 0 and not s.optimizers_made and (s.bw_losses or s.backward_steps):
        _flush_backward_steps(s)
        s.step_source = "backward"
        s.losses = dict(s.bw_losses)
        s.loss_counts = dict.fromkeys(s.bw_losses, 1)
        s.step_times = {i + 2: b - a for i, (a, b) in enumerate(zip(s.bw_times, s.bw_times[1:]))}
    if s.training is not None:
        _switch_phase(s, s.training)   # close the last phase's counts
        if not s.training:
            s.eval_entries -= 1
    return {
        "step_source": s.step_source if (s.step or s.step_source == "backward") else None,
        "lr": {str(k): v for k, v in sorted(s.lrs.items())},
        "param_checksum": {str(k): v for k, v in sorted(s.checksums.items())},
        "batch_size": {str(k): v for k, v in sorted(s.batch_sizes.items())},
        "batch_fingerprint": {str(k): v for k, v in sorted(s.batch_fingerprints.items())},
        "param_dtypes": sorted(s.param_dtypes),
        "param_devices": sorted(s.param_devices),
        "input_devices": sorted(s.input_devices),
        "phases": s.phases,
        "eval_phases": s.eval_entries,
        "per_step": {name: {str(k): v for k, v in sorted(series.items())} for name, series in s.per_step.items()},
        "first_non_finite": {"loss": _first_non_finite(s.losses), "grad_norm": _first_non_finite(s.grad_norms)},
        "runtime": _runtime(),
        **_replica_trace(s),
    }


def _replica_trace(s: _State) -> dict:
    """Replicas and collectives (docs/rerun.md): clips with their norm before clipping, bound and
    whether they came before any reduction; per-replica gradient norms and parameter sums where
    one process drives several replicas; the norm at the first collective; what reduced the
    gradients; the collectives by name; the inputs' SPMD sharding and its data-parallel degree."""
    spec = max(s.input_shardings, key=s.input_shardings.__getitem__) if s.input_shardings else None
    return {
        "clips": {str(k): v for k, v in sorted(s.clip_norms.items())},
        "replica_grad_norm": {str(k): v for k, v in sorted(s.replica_norms.items())},
        "replica_checksum": {str(k): v for k, v in sorted(s.replica_checksums.items())},
        "pre_reduce_grad_norm": {str(k): v for k, v in sorted(s.pre_reduce_norms.items())},
        "reducers": sorted(s.reducers),
        "collectives": dict(sorted(s.collectives.items())),
        "input_sharding": None if spec is None else {"spec": spec, "data_parallel": _data_parallel(spec),
                                                     "steps": s.input_shardings[spec],
                                                     "specs": len(s.input_shardings)},
    }


def report(s: _State) -> dict:
    try:
        s.trailing_backward_calls = len(s.pending) + s.dropped_pending   # after the last optimizer step
        s.pending = []
        _flush(s)
    except Exception as exc:
        s.error("fetch", exc)
    trace: dict = {}
    if "torch" in sys.modules:
        try:
            trace = _trace(s)
        except Exception as exc:
            s.error("trace", exc)
    info = _environment(s) if "torch" in sys.modules else {}
    try:
        info["ran_with"] = _ran_with()
    except Exception as exc:
        s.error("ran_with", exc)
    steps = s.step or (len(s.losses) if trace.get("step_source") == "backward" else 0)
    return {
        "probe_version": VERSION,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "parent_pid": s.pid if s.pid != os.getpid() else None,
        "argv": list(sys.argv),
        "started_at": s.started,
        "ended_at": time.time(),
        "steps": steps,
        "other_optimizer_steps": s.other_optimizer_steps,
        "fetches": s.fetches,
        "trailing_backward_calls": 0 if trace.get("step_source") == "backward" else s.trailing_backward_calls,
        "optimizers_made": s.optimizers_made,
        "loss": {str(k): v for k, v in sorted(s.losses.items())},
        "backward_calls": {str(k): v for k, v in sorted(s.loss_counts.items())},
        "grad_norm": {str(k): v for k, v in sorted(s.grad_norms.items())},
        "step_time": {str(k): v for k, v in sorted(s.step_times.items())},
        "errors": s.errors,
        "idle": not (steps or s.trailing_backward_calls or s.losses or "torch_xla" in sys.modules),
        **trace,
        **info,
    }


SUMMARY_KEYS = ("device_kind", "global_device_count", "devices_used", "world_size", "rank",
                "launcher_world_size", "spmd", "steps", "step_source", "optimizers_made", "trailing_backward_calls")


def summary(data: dict) -> dict | None:
    """The `workbench-probe {json}` line's object for a report; None for an idle process.

    The workbench reduces stored reports with this same function (workbench.probe.facts), so
    the line and the file say the same thing to the verifier.
    """
    if data.get("idle"):
        return None
    import statistics  # at exit, not at the program's start (this module loads in every process)

    out = {k: data.get(k) for k in SUMMARY_KEYS}
    xm = data.get("xla_metrics") or {}
    if xm:
        out.update(compiles=xm.get("compiles"), fallbacks=sorted(xm.get("fallbacks") or {}))
    runtime = data.get("runtime")
    if isinstance(runtime, dict):
        out["runtime"] = runtime.get("name")
    per_step = data.get("per_step") or {}
    for name in ("host_reads", "item_calls"):
        series = per_step.get(name) or {}
        if isinstance(series, dict) and len(series) > 2:   # after the first two (start-up, first compile)
            after = [v for k, v in series.items() if int(k) > 2]
            if after:
                out[name + "_per_step"] = statistics.median(after)
    phases = data.get("phases")
    if isinstance(phases, dict) and xm:
        out["compiles_by_phase"] = {k: v.get("compiles") for k, v in phases.items() if isinstance(v, dict)}
    if data.get("eval_phases") is not None:
        out["eval_phases"] = data.get("eval_phases")
    bad = data.get("first_non_finite") or {}
    if isinstance(bad, dict) and any(v is not None for v in bad.values()):
        out["first_non_finite"] = bad
    if data.get("param_dtypes"):
        out["param_dtypes"] = data.get("param_dtypes")
    sizes = data.get("batch_size") or {}
    if isinstance(sizes, dict) and sizes:
        out["batch_size"] = statistics.median(sizes.values())
    return out


def _at_exit() -> None:
    s = _state
    if s is None or s.written:
        return
    s.written = True
    try:
        data = report(s)
        os.makedirs(s.out_dir, exist_ok=True)
        name = f"probe-{data['host']}-{data['pid']}.json"
        tmp = os.path.join(s.out_dir, name + ".tmp")
        with open(tmp, "w") as fh:
            json.dump(data, fh, default=str)
        os.replace(tmp, os.path.join(s.out_dir, name))
        line = summary(data)
        if line is None:
            return  # a launcher (torchrun's parent) or a helper process: no summary line
        sys.stderr.write("workbench-probe " + json.dumps(line, default=str) + "\n")
        sys.stderr.flush()
    except Exception as exc:  # the exit of the program is not ours to spoil
        try:
            sys.stderr.write(f"workbench-probe-error {type(exc).__name__}: {exc}\n")
        except Exception:
            pass


# --------------------------------------------------------------------------- installing


def _hook_torch(torch) -> None:
    import functools

    original = torch.autograd.backward

    @functools.wraps(original)
    def backward(tensors, *args, **kwargs):
        _on_backward(tensors)
        return original(tensors, *args, **kwargs)

    torch.autograd.backward = backward
    made = torch.optim.Optimizer.__init__

    @functools.wraps(made)
    def optimizer_init(self, *args, **kwargs):
        if _state is not None:
            _state.optimizers_made += 1
            _state.first_optimizer = _state.first_optimizer or self
        return made(self, *args, **kwargs)

    torch.optim.Optimizer.__init__ = optimizer_init
    _hook_clip(torch)
    if torch.distributed.is_available():
        _hook_collectives(torch.distributed, COLLECTIVES, "")
    from torch.nn.modules.module import register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(_on_optimizer_step)
    register_module_forward_pre_hook(_on_forward)


def _hook_clip(torch) -> None:
    """clip_grad_norm_, where programs reach it (torch.nn.utils and its clip_grad module; torch_xla
    puts its own in torch.nn.utils, wrapped again once it loads), reports the norm it measured and
    its bound to the trace."""
    import functools

    import torch.nn.utils.clip_grad as clip_grad

    def wrap(original):
        if getattr(original, "_workbench_probe", False):
            return original

        @functools.wraps(original)
        def clip_grad_norm_(parameters, max_norm, *args, **kwargs):
            if not isinstance(parameters, torch.Tensor):
                parameters = list(parameters)   # a generator is read once: by the clip and the trace alike
            total = original(parameters, max_norm, *args, **kwargs)
            _on_clip([parameters] if isinstance(parameters, torch.Tensor) else parameters, total, max_norm)
            return total

        clip_grad_norm_._workbench_probe = True
        return clip_grad_norm_

    clip_grad.clip_grad_norm_ = wrap(clip_grad.clip_grad_norm_)
    torch.nn.utils.clip_grad_norm_ = wrap(torch.nn.utils.clip_grad_norm_)


def _hook_collectives(module, names: tuple[str, ...], prefix: str) -> None:
    """Counts each call of `module`'s collectives (its internal calls too: they look the name up)."""
    import functools

    def wrap(name, original):
        @functools.wraps(original)
        def collective(*args, **kwargs):
            _on_collective(prefix + name)
            return original(*args, **kwargs)
        return collective

    for name in names:
        original = getattr(module, name, None)
        if callable(original):
            setattr(module, name, wrap(name, original))


def _hook_xla_model(xm) -> None:
    _hook_collectives(xm, (*COLLECTIVES, "reduce_gradients"), "xm.")


HOOKS = {"torch": _hook_torch, "torch_xla.core.xla_model": _hook_xla_model,
         "torch_xla": lambda module: _hook_clip(sys.modules["torch"])}
"""Modules hooked right after the program imports them."""


class _TorchWatcher:
    """A meta-path finder that hooks torch (and torch_xla's xla_model) right after the program
    imports them."""

    def __init__(self) -> None:
        self.left = set(HOOKS)

    def find_spec(self, name, path=None, target=None):
        if name not in self.left:
            return None
        import importlib.machinery

        self.left.discard(name)
        if not self.left:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            try:
                HOOKS[name](module)
            except Exception as exc:
                if _state is not None:
                    _state.error("install", exc)

        loader.exec_module = exec_module
        return spec


def install() -> bool:
    """Start probing this process when WORKBENCH_PROBE_DIR is set; True when it did."""
    global _state
    out = os.environ.get("WORKBENCH_PROBE_DIR")
    if not out or _state is not None:
        return False
    _state = _State(out)
    atexit.register(_at_exit)
    watcher = _TorchWatcher()
    for name, hook in HOOKS.items():
        if name in sys.modules:
            watcher.left.discard(name)
            hook(sys.modules[name])
    if watcher.left:
        sys.meta_path.insert(0, watcher)
    return True
