"""Issue 18 on crafted logs, for fast feedback: topology read from the log and the command,
error messages that are not sharding specs, host syncs only when abnormal, evals at the same
step, glued multi-process lines, step-time throughput and re-runs that keep the recorded
environment. Real bundles, real SQLite, the real verifier; tests/test_verify_variants.py does
the same on real torch_xla runs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from conftest import BundleBuilder
from linearity import grows_linearly

from domain.models import FailureCause, Outcome
from storage import queries
from storage.database import open_study
from workbench.bundle import import_bundle
from workbench.verify import topology, verify_study
from workbench.verify.logscan import scan_chunks

P, F, U = Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN
STEPS = 30


def _steps(prefix: str = "", step_ms: float | None = None, loss=lambda s: 1.0 / s, last: int = STEPS) -> str:
    timing = f" step_time_ms={step_ms}" if step_ms is not None else ""
    return "".join(f"{prefix}step={s} loss={loss(s):.6f}{timing}\n" for s in range(1, last + 1))


def _report(scalars: int) -> str:
    return f"Counter: UncachedCompile\n  Value: 2\nCounter: aten::_local_scalar_dense\n  Value: {scalars}\n"


REFERENCE = _steps() + "eval_accuracy 0.91\n"


def verified(tmp_path: Path, attempts: dict[int, tuple[str, list[str]]], reference: str = REFERENCE,
             extra: dict[int, dict] | None = None, prices: dict[str, float] | None = None) -> dict[int, tuple]:
    """Each attempt (seq: (log, argv)) against the reference, intended on 4 CPU devices; `extra`
    changes an attempt's record (seq -> fields)."""
    extra = extra or {}
    builder = BundleBuilder(tmp_path / "bundle", prices={"cpu": 0.05} if prices is None else prices)
    builder.write_study()
    folder, shas = builder.add_migration("m")
    records = []
    for seq, (log, argv) in {0: (reference, ["python", "train.py"]), **attempts}.items():
        (folder / "logs" / f"{seq}.log").write_text(log)
        records.append(builder.attempt(seq, shas[-1], **{
            "metrics": None, "command": {"argv": argv, "env": {}}, "intended_hardware": {"kind": "cpu", "count": 4},
            "observed_hardware": {"kind": "cpu", "count": 1} if seq == 0 else None, **extra.get(seq, {})}))
    builder.write_attempts(folder, records)
    study = open_study(tmp_path / "s.db", create=True)
    try:
        assert not import_bundle(study, builder.root, "ana").problems
        db = study.db
        verify_study(db, "ana")
        m = queries.get_migration(db, "m")
        out = {}
        for seq in attempts:
            a = queries.attempt_id_by_seq(db, m.id, seq)
            verdicts = queries.verdicts(db, a)
            out[seq] = (tuple(v.outcome for v in verdicts), queries.current_verification(db, a), verdicts,
                        queries.current_failure(db, a))
        return out
    finally:
        study.close()


# --------------------------------------------------------------------------- reading topology


def test_key_value_and_key_colon_forms_are_read_with_their_lines():
    head = (b"starting\nrank=0 world_size=1 device_count=4 local_world_size=1\n"
            b"World size: 4, Global devices: [0, 1, 2, 3]\nMesh shape: (4, 1)\n")
    topo = topology.read(head)
    assert [(s.line, s.values) for s in topo.statements] == [
        (2, {"rank": 0, "world_size": 1, "device_count": 4, "local_world_size": 1}),
        (3, {"world_size": 4, "global_devices": 4}),
        (4, {"mesh_shape": 4}),
    ]
    assert topo.device_count()[0] == 4


def test_accelerate_state_lines_are_read():
    topo = topology.read(b"Distributed environment: MULTI_GPU  Backend: nccl\nNum processes: 4\nProcess index: 0\n"
                         b"Local process index: 0\nDevice: cuda:0\n")
    assert [s.values for s in topo.statements] == [{"world_size": 4}, {"rank": 0}, {"local_rank": 0}]


def test_an_error_message_states_nothing():
    head = (b"RuntimeError: bad sharding: global_devices=[0,1,2,3] mesh_shape=(2,2)\n"
            b"2026-12-03 08:20:10.233554: E external/xla/xla/service/rendezvous.cc:100] [id=0] This thread has "
            b"been waiting for `all reduce RendezvousKey{run_id=RunId: 0, global_devices=[0,1,2,3], "
            b"num_local_participants=4, collective_op_kind=cross_replica, op_id=0}` for 5 seconds\n")
    assert topology.read(head).statements == []


def test_glued_start_lines_are_both_read():
    topo = topology.read(b"rank=1 world_size=4 device_count=4rank=2 world_size=4 device_count=4\n")
    assert [s.values["rank"] for s in topo.statements] == [1, 2] and topo.processes() == 2


def test_launchers_in_the_command():
    assert topology.launcher(["torchrun", "--nproc_per_node=4", "train.py"]) == ("torchrun --nproc_per_node", 4)
    assert topology.launcher(["python", "-m", "torch.distributed.run", "--nproc-per-node", "2", "t.py"])[1] == 2
    assert topology.launcher(["accelerate", "launch", "--num_processes", "8", "t.py"])[1] == 8
    assert topology.launcher(["python", "-c", "xmp.spawn(fn, nprocs=4)"])[1] == 4
    assert topology.launcher(["python", "train.py", "--nproc_per_node=4"]) is None


def test_repeated_step_lines_and_rank_prefixes_count_processes():
    head = "".join(f"[rank{r}]: step={s} loss=0.5\n" for s in range(1, 6) for r in range(4)).encode()
    topo = topology.read(head)
    assert topo.ranks == {0, 1, 2, 3} and topo.repeats == 4 and topo.processes() == 4
    assert topology.read(_steps().encode()).processes() == 1


def test_the_head_is_cut_at_a_line_end_and_the_log_read_once():
    data = b"".join(b"line %d world_size=1\n" % i for i in range(1000))
    pieces = [data[i:i + 100] for i in range(0, len(data), 100)]
    head, chunks = topology.head_of(iter(pieces), limit=1000)
    assert head.endswith(b"\n") and len(head) <= 1000 and data.startswith(head)
    assert b"".join(chunks) == data


def test_the_topology_patterns_are_linear_on_a_megabyte_line():
    def run(head: bytes, unit: bytes, n: int) -> None:
        line = head + unit * (n // len(unit)) + b"\n"
        topology.read(line)
        list(topology.Untangler().chunks([line]))

    for head, unit in ((b"", b"world_size"), (b"", b"1step="), (b"", b"1eval_"), (b"[rank1]:", b"step"), (b"rank=[", b"1,")):
        assert grows_linearly(lambda n, h=head, u=unit: run(h, u, n), 250_000), unit


def test_glued_lines_are_split_and_line_numbers_kept():
    text = (b"step=51 loss=0.40\nstep=52 loss=0.35 step_time_ms=27.8step=60 loss=0.341704 step_time_ms=27.9\n"
            b"[rank1]: step=53 loss=9.0\n[rank0]: step=53 loss=0.33\nTraceback (most recent call last):\n"
            b"ValueError: boom\n")
    untangler = topology.Untangler()
    facts = untangler.remap(scan_chunks(untangler.chunks([text[i:i + 7] for i in range(0, len(text), 7)])))
    assert facts.point_series()["loss"] == {51: 0.40, 52: 0.35, 60: 0.341704, 53: 0.33}
    assert facts.points["loss"][60][1] == 2 and facts.points["loss"][53][1] == 4
    assert facts.exceptions[0].line == 6 and facts.lines == 6 and facts.size == len(text)


def _processes(seed: int, n: int = 4) -> str:
    """n identical processes' output as unbuffered writes interleave: each print is two writes
    (the text, then its newline), the processes start apart and an eval takes longer than a step,
    so a line often runs into another process's (`...=3.1eval_accuracy 0.6650`) and another
    process's step line often comes between a step and its eval. The order varies with the seed."""
    rng = random.Random(seed)
    lines = ["rank=0 world_size=1 device_count=1"]
    for s in range(1, STEPS + 1):
        lines.append(f"step={s} loss={1.0 / s:.6f} step_time_ms=3.1")
        if s % 10 == 0:
            lines.append(f"eval_accuracy 0.{50 + s}")
    writes = []
    for _ in range(n):
        t = rng.uniform(0, 0.3)
        for line in lines:
            t += rng.uniform(0.001, 0.03) * (10 if line.startswith("eval") else 1)
            writes += [(t, line), (t + rng.uniform(0, 0.002), "\n")]
    return "".join(w for _, w in sorted(writes))


EVALS_REF = "".join(f"step={s} loss={1.0 / s:.6f}\n" + (f"eval_accuracy 0.{50 + s}\n" if s % 10 == 0 else "")
                    for s in range(1, STEPS + 1))


@pytest.mark.parametrize("seed", range(40))
def test_interleaved_identical_processes_credit_each_eval_to_its_own_step(seed):
    """Whatever the order of four identical processes' lines, every loss and every eval is the
    one of its step: an eval is credited only where no process lags behind another."""
    untangler = topology.Untangler()
    log = _processes(seed).encode()
    series = untangler.remap(scan_chunks(untangler.chunks([log]), standing=untangler.standing)).point_series()
    assert series["loss"] == {s: round(1.0 / s, 6) for s in range(1, STEPS + 1)}
    assert series["eval_accuracy"][STEPS] == 0.80  # the last eval: every process has printed its last step
    assert all(value == 0.5 + step / 100 for step, value in series["eval_accuracy"].items())


def test_the_interleaving_that_credited_an_eval_to_another_step_now_passes_level_2(tmp_path):
    """Seed 216 ends with two processes' final evals glued (`eval_accuracy 0.80eval_accuracy 0.80`)
    after a lagging process's step-20 eval was credited to step 30: the previous rules failed level
    2 on it (0.70 against 0.80). Level 2 passes on it and on two other orders."""
    argv = ["python", "-m", "torch.distributed.run", "--nproc_per_node=4", "train.py"]
    out = verified(tmp_path, {seed + 1: (_processes(seed), argv) for seed in (216, 1, 2)}, reference=EVALS_REF)
    for levels, v, verdicts, _ in out.values():
        assert levels[1] is P and "eval_accuracy" in verdicts[1].reason, verdicts[1].reason
        assert levels[2] is F and v.cause is FailureCause.WRONG_CONFIGURATION


def test_standing_names_a_step_only_when_every_process_stands_there():
    standing = topology.Standing()
    for step in (1, 2, 1):
        standing.advance(step)
    assert standing.only() is None  # one process at 2, one at 1
    standing.advance(2)
    assert standing.only() == 2
    for step in (10, 20, 10):  # sparse step lines: the next step printed, not step + 1
        standing.advance(step)
    assert standing.only() is None
    standing.advance(20)
    assert standing.only() == 20


# --------------------------------------------------------------------------- level 3


def test_one_device_where_four_were_intended_visible_only_in_the_log(tmp_path):
    log = "device_count=1 world_size=1 rank=0\nmesh_shape=(1,)\n" + _steps() + "eval_accuracy 0.91\n"
    levels, v, verdicts = verified(tmp_path, {1: (log, ["python", "train.py", "--spmd"])})[1][:3]
    assert levels[:4] == (P, P, F, P)
    assert v.cause is FailureCause.WRONG_CONFIGURATION and v.silent
    assert "1 device(s) where 4" in verdicts[2].reason and verdicts[2].evidence[0].ref == "2"  # the mesh


def test_torchrun_processes_each_alone_fail_level_3_citing_both(tmp_path):
    starts = "".join("rank=0 world_size=1 device_count=1\n" for _ in range(4))
    log = starts + "".join(f"step={s} loss={1.0 / s:.6f}\n" * 4 for s in range(1, STEPS + 1)) + "eval_accuracy 0.91\n"
    argv = ["torchrun", "--nproc_per_node=4", "train.py"]
    levels, v, verdicts = verified(tmp_path, {1: (log, argv), 2: (log, ["python", "train.py"])})[1][:3]
    assert levels[2] is F and v.cause is FailureCause.WRONG_CONFIGURATION
    assert "launcher starts 4 processes" in verdicts[2].reason and "world size 1" in verdicts[2].reason
    kinds = {e.kind for e in verdicts[2].evidence}
    assert kinds == {"record", "log_line"}


def test_processes_alone_without_a_launcher_in_the_command(tmp_path):
    starts = "".join("rank=0 world_size=1 device_count=4\n" for _ in range(4))
    log = starts + "".join(f"step={s} loss={1.0 / s:.6f}\n" * 4 for s in range(1, STEPS + 1)) + "eval_accuracy 0.91\n"
    levels, v, verdicts = verified(tmp_path, {1: (log, ["python", "train.py"])})[1][:3]
    assert levels[2] is F and "4 processes each report world size 1" in verdicts[2].reason
    assert any("printed 4 times" in e.text for e in verdicts[2].evidence)


def test_a_start_line_printed_twice_is_not_two_processes(tmp_path):
    start = "device_count=4 world_size=1 rank=0\n"
    log = start + _steps() + "eval_accuracy 0.91\n" + start
    levels, _, verdicts = verified(tmp_path, {1: (log, ["python", "train.py"])})[1][:3]
    assert levels[2] is P, verdicts[2].reason


def test_a_mesh_over_fewer_devices_than_the_run_sees(tmp_path):
    log = "device_count=4 world_size=1\nmesh_shape=(2, 1)\n" + _steps() + "eval_accuracy 0.91\n"
    levels, v, verdicts = verified(tmp_path, {1: (log, ["python", "train.py"])})[1][:3]
    assert levels[2] is F and "2 device(s) where 4" in verdicts[2].reason and verdicts[2].evidence[0].ref == "2"


@pytest.mark.parametrize("start", [
    "device_count=4 world_size=1 rank=0\nmesh_shape=(4, 1)\n",  # SPMD: one process drives all four
    "device_count=4 world_size=1\n",  # replicas: one process, a model copy per device
])
def test_correct_spmd_and_replica_runs_pass_level_3(tmp_path, start):
    levels, v, verdicts = verified(tmp_path, {1: (start + _steps() + "eval_accuracy 0.91\n", ["python", "train.py"])})[1][:3]
    assert levels[:4] == (P, P, P, P), [d.reason for d in verdicts]
    assert "ran on 4 device(s), kind not stated in the evidence, as intended" in verdicts[2].reason


def test_torchrun_with_the_right_world_size_passes(tmp_path):
    starts = "".join(f"rank={r} world_size=4 device_count=4\n" for r in range(4))
    log = starts + "".join(f"[rank{r}]: step={s} loss={1.0 / s:.6f}\n" for s in range(1, STEPS + 1) for r in range(4))
    log += "[rank0]: eval_accuracy 0.91\n"
    levels, _, verdicts = verified(tmp_path, {1: (log, ["torchrun", "--nproc_per_node", "4", "train.py"])})[1][:3]
    assert levels[2] is P, verdicts[2].reason


def test_an_error_holding_global_devices_is_not_a_sharding_spec(tmp_path):
    log = (_steps(last=5) + "Traceback (most recent call last):\n  File \"train.py\", line 3\n"
           "RuntimeError: Check failed: mesh global_devices=[0,1,2,3], devices=[2,2]0,1,2,3 expected 4\n")
    levels, v, verdicts = verified(tmp_path, {1: (log, ["python", "train.py"])},
                                   extra={1: {"exit_code": 1, "status": "nonzero_exit"}})[1][:3]
    assert levels[0] is F and v.cause is FailureCause.CRASH
    assert "0 devices" not in verdicts[2].reason and "sharding over 0" not in json.dumps(
        [e.text for e in verdicts[2].evidence])


# --------------------------------------------------------------------------- level 2


def test_a_crash_before_the_last_eval_is_compared_only_at_its_own_eval(tmp_path):
    ref = "".join(f"step={s} loss={1.0 / s:.6f}\n" + ("eval_accuracy 0.%d\n" % (50 + s) if s % 10 == 0 else "")
                  for s in range(1, STEPS + 1))
    log = ref.split("step=21 ")[0] + "step=21 loss=0.047619\nTraceback (most recent call last):\nRuntimeError: x\n"
    levels, v, verdicts = verified(tmp_path, {1: (log, ["python", "train.py"])}, reference=ref,
                                   extra={1: {"exit_code": 1, "status": "nonzero_exit"}})[1][:3]
    assert levels[:2] == (F, U), verdicts[1].reason
    assert "eval_accuracy agrees at step 20" in verdicts[1].reason


def test_a_run_that_crashed_after_its_last_step_does_not_pass_level_2(tmp_path):
    """Every step printed and agreeing, then a traceback and exit 1 (saving the model failed): the
    run did not end, so its agreement is unknown, not a pass (it read ✗✓??? before)."""
    log = REFERENCE + "Traceback (most recent call last):\n  File \"train.py\", line 9\nOSError: disk full\n"
    levels, v, verdicts = verified(tmp_path, {1: (log, ["python", "train.py"])},
                                   extra={1: {"exit_code": 1, "status": "nonzero_exit"}})[1][:3]
    assert levels[:2] == (F, U) and v.cause is FailureCause.CRASH, verdicts[1].reason
    assert verdicts[1].reason.startswith("the run failed (level 1), so agreement is unknown: agrees")


def test_an_eval_at_another_step_is_not_compared(tmp_path):
    log = _steps() + "eval_accuracy 0.10\n"
    ref = _steps(last=STEPS - 1) + "eval_accuracy 0.91\n" + f"step={STEPS} loss={1.0 / STEPS:.6f}\n"
    levels, _, verdicts = verified(tmp_path, {1: (log, ["python", "train.py"])}, reference=ref)[1][:3]
    assert levels[1] is U and "no eval_accuracy at that step" in verdicts[1].reason


def test_glued_multi_process_lines_credit_no_step_with_another_steps_value(tmp_path):
    lines = [f"step={s} loss={1.0 / s:.6f} step_time_ms=27.8" for s in range(1, STEPS + 1)]
    glued = []
    for s, line in enumerate(lines, 1):  # two processes; process 2's step 30 glued to process 1's step 22
        glued.append(line if s != 22 else line + lines[-1])
        glued.append(line if s != STEPS else "")
    log = "rank=0 world_size=2 device_count=4\nrank=1 world_size=2 device_count=4\n" + "\n".join(glued) + "\n"
    log += "eval_accuracy 0.91\n"
    levels, v, verdicts = verified(tmp_path, {1: (log, ["torchrun", "--nproc_per_node=2", "train.py"])})[1][:3]
    assert levels[:4] == (P, P, P, P), [d.reason for d in verdicts]


def test_a_mismatch_in_bfloat16_says_so(tmp_path):
    """Losses that are all bfloat16 numbers (bf16 weights drift) against a float32 reference: level
    2 fails as a numerical mismatch and says the attempt's values are bfloat16 numbers; a float32
    mismatch (a wrong learning rate) does not."""
    import struct

    def bf16(s: int) -> float:  # rounded to the nearest bfloat16, as a cast would
        bits = struct.unpack("<I", struct.pack("<f", 1.03 / s))[0]
        return struct.unpack("<f", struct.pack("<I", (bits + 0x8000) & 0xFFFF0000))[0]

    out = verified(tmp_path, {1: (_steps(loss=bf16) + "eval_accuracy 0.91\n", ["python", "train.py"]),
                              2: (_steps(loss=lambda s: 1.05 / s) + "eval_accuracy 0.91\n", ["python", "train.py"])})
    (levels, v, verdicts, _), (levels2, _, verdicts2, _) = out[1], out[2]
    assert levels[1] is F and v.cause is FailureCause.NUMERICAL_MISMATCH and v.silent
    assert "every loss value the attempt logged is a bfloat16 number" in verdicts[1].reason
    assert levels2[1] is F and "bfloat16" not in verdicts2[1].reason


# --------------------------------------------------------------------------- level 5 and causes


def test_host_syncs_are_a_cause_only_when_abnormal(tmp_path):
    start = "device_count=4 world_size=1\n"
    normal = start + _steps() + "eval_accuracy 0.91\n" + _report(2 * STEPS)  # loss.item() and one more
    forced = start + _steps() + "eval_accuracy 0.91\n" + _report(12 * STEPS)
    out = verified(tmp_path, {1: (normal, ["python", "train.py"]), 2: (forced, ["python", "train.py"])},
                   extra={1: {"ended_at": "2026-11-01T10:01:50Z"}, 2: {"ended_at": "2026-11-01T10:02:50Z"}})
    levels, v, verdicts, failure = out[1]
    assert levels == (P, P, P, P, F) and v.cause is FailureCause.SLOWER_OR_COSTLIER
    assert "slower or costlier" in verdicts[4].reason and "full-run wall time" in verdicts[4].reason
    assert "2.0 host syncs per step" in verdicts[4].reason  # the breakdown, shown always
    levels, v, verdicts, failure = out[2]
    assert levels == (P, P, P, P, F) and v.cause is FailureCause.HOST_SYNC
    assert "(12.0 per step): above 4 per step" in failure.evidence[0].text


def test_level_5_decides_on_full_run_wall_time_the_step_time_in_its_breakdown(tmp_path):
    """The paper times full runs: an attempt whose steps are faster than the reference's but whose
    run took longer (start-up, compilation, a slow input pipeline) is slower."""
    ref = _steps(step_ms=10.0) + "eval_accuracy 0.91\n"
    fast = "device_count=1\n" + "".join(
        f"step={s} loss={1.0 / s:.6f} step_time_ms={2000.0 if s < 3 else 2.0}\n" for s in range(1, STEPS + 1))
    out = verified(tmp_path, {1: (fast + "eval_accuracy 0.91\n", ["python", "train.py"]),
                              2: (fast + "eval_accuracy 0.91\n", ["python", "train.py"])}, reference=ref,
                   extra={1: {"ended_at": "2026-11-01T10:01:45Z", "intended_hardware": {"kind": "cpu", "count": 1}},
                          2: {"ended_at": "2026-11-01T10:02:15Z", "intended_hardware": {"kind": "cpu", "count": 1}}})
    levels, v, verdicts, _ = out[1]
    assert levels[4] is F and v.cause is FailureCause.SLOWER_OR_COSTLIER, verdicts[4].reason
    assert v.time_ratio == pytest.approx(1.5)  # 45 s against the reference's 30 s
    assert "median step time after step 10: 2 ms (step_time_ms, 20 steps)" in verdicts[4].reason
    assert "start-up and outside the steps 40.9 s" in verdicts[4].reason  # 45 s less 4.06 s of steps
    levels, v, verdicts, _ = out[2]
    assert levels[4] is P and v.time_ratio == pytest.approx(0.5), verdicts[4].reason
    assert "time x0.50, cost x0.50: better on both (from full-run wall time)" in verdicts[4].reason


def test_level_5_without_a_price_decides_on_time_alone_both_ways(tmp_path):
    log = "device_count=4 world_size=1\n" + _steps() + "eval_accuracy 0.91\n"
    out = verified(tmp_path, {1: (log, ["python", "train.py"]), 2: (log, ["python", "train.py"])}, prices={},
                   extra={1: {"ended_at": "2026-11-01T10:01:20Z"}, 2: {"ended_at": "2026-11-01T10:02:50Z"}})
    (faster, _, fv, _), (slower, sv, sw, _) = out[1], out[2]
    assert faster[4] is P and "cost unknown (no price): time alone decides, faster" in fv[4].reason
    assert slower[4] is F and sv.cause is FailureCause.SLOWER_OR_COSTLIER
    assert "cost unknown (no price): time alone decides, not faster" in sw[4].reason


# --------------------------------------------------------------------------- re-runs


def test_a_rerun_keeps_the_recorded_environment(tmp_path):
    from workbench.rerun.jobs import spec_for

    builder = BundleBuilder(tmp_path / "bundle", prices={"cpu": 0.05})
    builder.write_study()
    folder, shas = builder.add_migration("m")
    env = {"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "1"}
    builder.write_attempts(folder, [builder.attempt(0, shas[0]),
                                    builder.attempt(1, shas[-1], command={"argv": ["python", "train.py"], "env": env})])
    study = open_study(tmp_path / "s.db", create=True)
    try:
        import_bundle(study, builder.root, "ana")
        _, attempt = queries.find_attempt(study.db, "m", 1)
        spec = spec_for(study.db, attempt, "local", chips=4)
        assert spec.env["CPU_NUM_DEVICES"] == "1" and spec.env["PJRT_DEVICE"] == "CPU"
    finally:
        study.close()
    from click.testing import CliRunner

    from cli.main import main

    shown = CliRunner().invoke(main, ["rerun", str(tmp_path / "s.db"), "m", "1", "--chips", "4"], input="n\n")
    assert shown.exit_code == 2  # not confirmed (or no `python` here): nothing ran either way
    assert "kept      CPU_NUM_DEVICES=1 (recorded; the local backend would set 4: XLA:CPU devices" in shown.output
    edited = CliRunner().invoke(main, ["rerun", str(tmp_path / "s.db"), "m", "1", "--chips", "4",
                                       "--env", "CPU_NUM_DEVICES=4"], input="n\n")
    assert "changed   CPU_NUM_DEVICES: recorded 1, used 4 (backend default chosen by the reviewer" in edited.output


# --------------------------------------------------------------------------- the stand-in


def _on_tpu(**fields) -> dict:
    return {"intended_hardware": {"kind": "tpu-v5e", "count": 4}, **fields}


def test_a_run_on_xla_cpu_standing_in_for_a_tpu_is_named_not_failed(tmp_path):
    """Target tpu-v5e x4 re-run on XLA:CPU x4 (the local backend's stand-in): level 3 names the
    stand-in and checks the count; level 5 does not read the stand-in's clock against the plain-CPU
    reference, the host syncs decide; a wrong learning rate is a numerical mismatch, not the
    hardware's fault."""
    start = "device_count=4 world_size=1\n"
    port = start + _steps() + "eval_accuracy 0.91\n" + _report(2 * STEPS)
    synced = start + _steps() + "eval_accuracy 0.91\n" + _report(18 * STEPS)
    wrong_lr = start + _steps(loss=lambda s: 2.0 / s) + "eval_accuracy 0.91\n" + _report(2 * STEPS)
    one = "device_count=1 world_size=1\n" + _steps() + "eval_accuracy 0.91\n" + _report(2 * STEPS)
    plain = start + _steps(loss=lambda s: 2.0 / s) + "eval_accuracy 0.91\n"  # no XLA evidence: plain torch
    cpu = {"kind": "cpu", "count": 4}
    out = verified(tmp_path, {n: (log, ["python", "train.py"]) for n, log in
                              enumerate((port, synced, wrong_lr, one, plain), 1)},
                   extra={n: _on_tpu(observed_hardware=cpu, ended_at=f"2026-11-01T10:0{n}:50Z") for n in range(1, 6)})
    levels, v, verdicts, _ = out[1]
    assert levels == (P, P, P, P, U) and v.cause is None, [d.reason for d in verdicts]
    assert verdicts[2].reason.startswith("XLA:CPU x4 standing in for tpu-v5e x4")
    assert "UncachedCompile 2: the run executed on XLA" in [e.text for e in verdicts[2].evidence]
    assert "ran on XLA:CPU standing in for tpu-v5e" in verdicts[4].reason and "against the reference's" in verdicts[4].reason
    levels, v, verdicts, _ = out[2]
    assert levels == (P, P, P, P, F) and v.cause is FailureCause.HOST_SYNC, verdicts[4].reason
    levels, v, verdicts, _ = out[3]
    assert levels[1:3] == (F, P) and v.cause is FailureCause.NUMERICAL_MISMATCH
    levels, v, verdicts, _ = out[4]  # one device where four are intended: the stand-in shows the count
    assert levels[2] is F and "1 device(s) where 4" in verdicts[2].reason and v.cause is FailureCause.WRONG_CONFIGURATION
    levels, v, verdicts, _ = out[5]  # the kind fails, but it does not explain the numbers
    assert levels[1:3] == (F, F) and "ran on cpu, not tpu-v5e" in verdicts[2].reason
    assert v.cause is FailureCause.NUMERICAL_MISMATCH


# --------------------------------------------------------------------------- a series at its bound


def test_a_clipped_gradient_norm_is_compared_as_the_share_of_clipped_steps(tmp_path):
    """The reference clips its gradient norm to 1.0 on most steps; a faithful port on another
    backend clips on a few steps more (0.999999 where the reference had 0.872528, 14.6%: point by
    point it failed at any sane rtol); a port clipping each replica before averaging never reaches
    the bound."""
    def log(norm):
        return "".join(f"step={s} loss={1.0 / s:.6f} grad_norm={norm(s):.6f}\n" for s in range(1, STEPS + 1))

    ref = log(lambda s: 0.872528 if s % 7 == 0 else 0.999999) + "eval_accuracy 0.91\n"
    port = log(lambda s: 0.872528 if s % 14 == 0 else 0.999999) + "eval_accuracy 0.91\n"
    per_replica = log(lambda s: 0.61) + "eval_accuracy 0.91\n"
    out = verified(tmp_path, {1: (port, ["python", "train.py"]), 2: (per_replica, ["python", "train.py"])},
                   reference=ref)
    levels, v, verdicts, _ = out[1]
    assert levels[1] is P, verdicts[1].reason
    assert "grad_norm sits at its bound 0.999999 on 87% of the reference's steps (clipped)" in verdicts[1].reason
    assert "93% vs 87% over 30 steps" in verdicts[1].reason
    levels, v, verdicts, _ = out[2]
    assert levels[1] is F and v.cause is FailureCause.NUMERICAL_MISMATCH
    assert "0% vs 87% over 30 steps, more than 10% apart" in verdicts[1].reason
    assert verdicts[1].reason.endswith("; one reference run: noise not measured")


# --------------------------------------------------------------------------- the reference's noise

SEEDS = {1: -1.2, 2: -0.5, 3: 0.0, 4: 0.6, 5: 1.1}  # each seed's offset, in units of 0.002


def test_agreement_is_judged_against_the_replicates_band_in_sigmas(tmp_path):
    """The reference run five times with WORKBENCH_SEED 1-5 (its loss moves by about 0.002 from
    seed to seed): a port 0.003 off (9% at step 30, failing any fixed 1%) is within the noise and
    says by how many sigmas; a port 10% off is outside it."""
    def log(loss):
        return "".join(f"step={s} loss={loss(s):.6f}\n" for s in range(1, STEPS + 1)) + "eval_accuracy 0.91\n"

    builder = BundleBuilder(tmp_path / "bundle", prices={"cpu": 0.05})
    builder.write_study()
    folder, shas = builder.add_migration("m")
    runs = {seq: (log(lambda s, z=z: 1.0 / s + 0.002 * z), "reference", {"WORKBENCH_SEED": str(seq)})
            for seq, z in SEEDS.items()}
    runs[6] = (log(lambda s: 1.0 / s + 0.003), "agent", {})
    runs[7] = (log(lambda s: 1.1 / s), "agent", {})
    records = []
    for seq, (text, source, env) in runs.items():
        (folder / "logs" / f"{seq}.log").write_text(text)
        records.append(builder.attempt(seq, shas[-1], **{
            "source": source, "metrics": None, "command": {"argv": ["python", "train.py"], "env": env},
            "intended_hardware": {"kind": "cpu", "count": 1}, "observed_hardware": {"kind": "cpu", "count": 1}}))
    builder.write_attempts(folder, records)
    study = open_study(tmp_path / "s.db", create=True)
    assert not import_bundle(study, builder.root, "ana").problems
    db = study.db
    verify_study(db, "ana")
    m = queries.get_migration(db, "m")
    inside = queries.verdicts(db, queries.attempt_id_by_seq(db, m.id, 6))[1]
    off = queries.verdicts(db, queries.attempt_id_by_seq(db, m.id, 7))[1]
    study.close()
    assert inside.outcome is P, inside.reason
    assert "loss over 30 steps within the noise (largest: loss steps" in inside.reason
    assert "(5 seeds): 1.7σ, within noise" in inside.reason and "noise not measured" not in inside.reason
    assert off.outcome is F and "loss steps 1–5: 0.502" in off.reason and "outside the noise (95% band ±" in off.reason


def test_an_attempts_repeats_count_their_spread_at_levels_2_and_5(tmp_path):
    """An attempt re-run three times with WORKBENCH_SEED 1-3 (`rerun --repeat 3`, here from a
    bundle: re-runs naming the attempt they re-ran): level 2 compares their mean against the
    reference's five seeds with both spreads counted, and level 5 reads their wall times against
    the reference's: 29-31 s against 30 s is no difference; 59-61 s is slower. A re-run with no
    seed of its own has no repeats."""
    def log(loss):
        return "".join(f"step={s} loss={loss(s):.6f}\n" for s in range(1, STEPS + 1)) + "eval_accuracy 0.91\n"

    def wall(seq, seconds):
        day = f"2026-11-{1 + seq:02d}T10"
        return {"started_at": f"{day}:00:00Z", "ended_at": f"{day}:{seconds // 60:02d}:{seconds % 60:02d}Z"}

    builder = BundleBuilder(tmp_path / "bundle", prices={})
    builder.write_study()
    folder, shas = builder.add_migration("m")
    runs = {seq: (log(lambda s, z=z: 1.0 / s + 0.002 * z), "reference", {"WORKBENCH_SEED": str(seq)}, None, 29 + seq % 3)
            for seq, z in SEEDS.items()}
    runs[6] = (log(lambda s: 1.0 / s + 0.003), "agent", {}, None, 30)
    for seq, z, seconds in ((7, -1, 29), (8, 0, 31), (9, 1, 30)):   # the attempt's repeats
        runs[seq] = (log(lambda s, z=z: 1.0 / s + 0.003 + 0.002 * z), "rerun", {"WORKBENCH_SEED": str(seq - 6)}, 6, seconds)
    runs[10] = (log(lambda s: 1.0 / s), "agent", {}, None, 60)
    for seq, seconds in ((11, 59), (12, 61), (13, 60)):   # a slow port's repeats
        runs[seq] = (log(lambda s: 1.0 / s), "rerun", {"WORKBENCH_SEED": str(seq - 10)}, 10, seconds)
    runs[14] = (log(lambda s: 1.0 / s + 0.003), "rerun", {}, 6, 30)
    records = []
    for seq, (text, source, env, of, seconds) in runs.items():
        (folder / "logs" / f"{seq}.log").write_text(text)
        records.append(builder.attempt(seq, shas[-1], **{
            "source": source, "metrics": None, "command": {"argv": ["python", "train.py"], "env": env},
            "rerun_of": of, **wall(seq, seconds),
            "intended_hardware": {"kind": "cpu", "count": 1}, "observed_hardware": {"kind": "cpu", "count": 1}}))
    builder.write_attempts(folder, records)
    study = open_study(tmp_path / "s.db", create=True)
    assert not import_bundle(study, builder.root, "ana").problems
    db = study.db
    verify_study(db, "ana")
    m = queries.get_migration(db, "m")
    out = {seq: queries.verdicts(db, queries.attempt_id_by_seq(db, m.id, seq)) for seq in (7, 11, 14)}
    study.close()
    two, five = out[7][1], out[7][4]
    assert two.outcome is P and "(5 seeds; the attempt's 3 repeats ± 0.002): " in two.reason, two.reason
    assert five.outcome is U and "time x0.99 ± " in five.reason and "(this run: time x0.94" in five.reason, five.reason
    assert "(3 runs of the attempt, 5 of the reference): within the repeats' spread of x1, no difference" in five.reason
    slow = out[11][4]
    assert slow.outcome is F and "time x1.99 ± 0.09 (3 runs of the attempt, 5 of the reference): outside" in slow.reason, slow.reason
    single = out[14][1]
    assert single.outcome is P and "(5 seeds): " in single.reason and "repeats" not in single.reason
    assert out[14][4].outcome is U and "within the repeats' spread of x1" in out[14][4].reason  # the reference's spread
