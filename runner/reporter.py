"""Rank 0's side of a run: the report's meta, each finished case checked and appended,
``--out`` rewritten, the cases handed to the sender, the progress lines."""

from __future__ import annotations

import json
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.execute import ERROR_BOUNDS
from runner.matrix import Matrix
from runner.pipelines import REGISTRY
from runner.platform import Platform, datasheet_peaks, host_info, nvlink_counters
from runner.progress import Progress, progress_line
from runner.report import (
    PlatformFacts,
    Unmeasured,
    build_case,
    build_meta,
    check_service_accepts,
)
from runner.spec import CaseSpec
from runner.spool import Spool, SpoolError, write_atomic

if TYPE_CHECKING:
    from runner.client import Sender


@dataclass(frozen=True)
class RunOptions:
    matrix: Matrix
    url: str | None
    token: str | None
    out: Path | None
    spool_dir: Path
    deadline_s: float = 60.0


def platform_facts(plat: Platform, matrix: Matrix, world: int,
                   rank_nodes: list[str] | None = None) -> PlatformFacts:
    sheet = datasheet_peaks(plat.gpu_name) if plat.cuda else None
    overrides = matrix.peaks
    tf = dict(sheet.tf) if sheet else {}
    tf.update(overrides.tf)
    source = ("matrix override" if overrides.tf or overrides.hbm_gbps else
              "datasheet" if sheet else "none")
    return PlatformFacts(
        gpu_name=plat.gpu_name, cuda=plat.cuda,
        host=host_info(plat, world, rank_nodes), peaks_tf=tf,
        hbm_gbps=overrides.hbm_gbps or (sheet.hbm_gbps if sheet else None),
        nvlink_gbps_per_direction=(overrides.nvlink_gbps_per_direction
                                   or (sheet.nvlink_gbps_per_direction if sheet else None)),
        peaks_source=source,
        nvlink_fields=_nvlink_fields(plat),
        peaks_absent=dict(sheet.absent) if sheet else {},
    )


def _nvlink_fields(plat: Platform) -> str | None:
    counters = nvlink_counters(plat.device) if plat.cuda else None
    return counters.fields if counters else None


class Reporter:
    """Rank 0's side: the report, its delivery, ``--out`` and the progress lines."""

    def __init__(self, opts: RunOptions, matrix: Matrix, plat: Platform, world: int,
                 skipped: list[str], runnable: int,
                 ceilings: dict[str, Any] | None = None,
                 rank_nodes: list[str] | None = None) -> None:
        self.opts, self.matrix, self.started = opts, matrix, time.monotonic()
        self.facts = platform_facts(plat, matrix, world, rank_nodes)
        self.run_id = f"{socket.gethostname()}-{time.strftime('%Y%m%dT%H%M%S')}-" \
                      f"{uuid.uuid4().hex[:8]}"
        pipeline_notes = [REGISTRY[p].note for p in dict.fromkeys(c.pipeline
                                                                  for c in matrix.cases)]
        graph = [] if plat.cuda else ["no CUDA graphs on the CPU: graphAccepted is null"]
        self.meta = build_meta(matrix, self.facts, self.run_id, pipeline_notes, skipped, graph,
                               ceilings)
        self.cases: list[dict[str, Any]] = []
        self.runtime_skips: list[str] = []
        self.unposted_skips: list[str] = []
        self.progress = Progress(runnable)
        for reason in skipped:
            print(f"skip {reason}", file=sys.stderr)
        self.sender: Sender | None = None
        spool = Spool(opts.spool_dir)
        if opts.url:
            from runner.client import Sender, resend_earlier  # httpx only when posting

            resend_earlier(spool, opts.token)
            self.sender = Sender(spool, opts.url, opts.token, self.meta, opts.deadline_s)
            self.sender.start()
        self._write_out()

    def add(self, index: int, total: int, spec: CaseSpec, outcomes: list[Any]) -> bool:
        """Report one case; False when it failed (invalid, undeliverable, numerics not
        accepted). Running out of memory is an outcome, not a failure: the case is
        reported with ``ooms`` counted, or skipped when none of its times was measured."""
        bound = ERROR_BOUNDS[spec.precision]
        elapsed = time.monotonic() - self.started
        try:
            case = build_case(spec, self.matrix, outcomes, self.facts, bound)
            notes = [o.graph_note for o in outcomes if getattr(o, "graph_note", None)]
            if notes and self.facts.cuda:
                case["graphNote"] = notes[0]
            if self.unposted_skips:
                # The posted meta was written before the cases ran; the next case
                # carries what was skipped since the previous one.
                case["runtimeSkipped"] = list(self.unposted_skips)
            check_service_accepts(self.meta, [*self.cases, case])
        except Unmeasured as exc:
            self.skip_at_runtime(spec, str(exc))
            self.progress.case(progress_line(index, total, spec.id, elapsed, None, str(exc)),
                               spec.id)
            return True
        except ValueError as exc:
            self.skip_at_runtime(spec, f"invalid result: {exc}")
            self.progress.case(progress_line(index, total, spec.id, elapsed, None,
                                             "invalid result"), spec.id)
            return False
        self.unposted_skips.clear()
        self.cases.append(case)
        self._write_out()
        self.progress.case(progress_line(index, total, spec.id, elapsed, case), spec.id)
        if self.sender is not None:
            try:
                self.sender.send(case)
            except SpoolError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return False
        return case["numericalAccepted"] is not False

    def skip_at_runtime(self, spec: CaseSpec, reason: str) -> None:
        self.runtime_skips.append(f"{spec.id}: {reason}")
        self.unposted_skips.append(f"{spec.id}: {reason}")
        print(f"skip {spec.id}: {reason}", file=sys.stderr)

    def _write_out(self) -> None:
        if self.opts.out is None:
            return
        meta = dict(self.meta)
        if self.runtime_skips:
            meta["runtimeSkippedNote"] = "Skipped while running: " + "; ".join(
                self.runtime_skips)
        data = json.dumps({"meta": meta, "cases": self.cases}, indent=1).encode()
        write_atomic(self.opts.out, data)

    def abort(self, spec: CaseSpec | None, reason: str, where: str | None = None) -> int:
        """The run cannot go on (a peer rank or node is gone, a signal): the case in
        flight is recorded as lost and the run's failure kept in ``--out``
        (``runFailureNote``); the cases finished before are delivered as on a normal
        finish. ``where``: what was running, if not a case. Exit code 1."""
        where = where or (f"while running {spec.id}" if spec else "before the first case")
        self.meta["runFailureNote"] = (f"The run stopped {where}: {reason}. The cases "
                                       f"before it are complete; the rest did not run.")
        if spec is not None:
            self.skip_at_runtime(spec, f"lost: {reason}")
        print(f"error: {self.meta['runFailureNote']}", file=sys.stderr)
        self.finish(1)
        return 1

    def finish(self, failures: int) -> int:
        self.progress.close()
        self._write_out()
        if self.unposted_skips:
            print(f"note: skipped after the last posted case (in --out only): "
                  f"{'; '.join(self.unposted_skips)}", file=sys.stderr)
        code = 1 if failures else 0
        if not self.cases:  # every case skipped (or the run stopped first): say so
            why = "the run stopped" if "runFailureNote" in self.meta else "see the skip lines above"
            print(f"error: no case ran ({why})", file=sys.stderr)
            code = 1
        if self.sender is not None:
            result = self.sender.close()
            if result.pending or result.rejected:
                print(f"warning: {result.pending} case(s) still spooled in "
                      f"{self.opts.spool_dir}, {result.rejected} refused; resend with "
                      f"`moescope runner flush`", file=sys.stderr)
                code = 1
        print(f"{len(self.cases)} case(s) done, {failures} failed or not accepted, "
              f"run {self.run_id}", file=sys.stderr)
        return code
