"""The MoE layer's pieces: differentiable all-to-all, the SwiGLU experts, one routed pass.

The same code runs the measured layer (bf16, quantized by ``precision``) and its float32
reference (``precision="bf16"`` on float32 tensors: no rounding anywhere but float32's).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F

from runner.native import USAGE, Operand, gemm, quantize_operand, wire_operand
from runner.oom import guarded
from runner.phase_clock import CLOCK
from runner.quant import fake_quantize, pack_rows, unpack_rows
from runner.routing import RankRouting

GROUP_ROWS = 128


def _all_to_all(x: torch.Tensor, out_splits: list[int], in_splits: list[int],
                group: Any, traceable: bool) -> torch.Tensor:
    """``traceable``: through the functional collective (``torch.distributed.
    _functional_collectives``), which torch.compile traces into its graph; otherwise the
    in-place ``all_to_all_single`` into a preallocated buffer."""
    if group is None:  # one rank: nothing leaves
        return x.clone()
    if traceable:
        sent = funcol.all_to_all_single(x.contiguous(), out_splits, in_splits, group)
        received: torch.Tensor = funcol.wait_tensor(sent)
        return received
    out = x.new_empty((sum(out_splits), *x.shape[1:]))
    dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
    return out


class AllToAll(torch.autograd.Function):
    """Rows to their destinations; the gradient goes back the same way reversed."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, out_splits: list[int], in_splits: list[int],
                group: Any, traceable: bool) -> torch.Tensor:
        ctx.splits, ctx.group, ctx.traceable = (out_splits, in_splits), group, traceable
        return _all_to_all(x, out_splits, in_splits, group, traceable)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        out_splits, in_splits = ctx.splits
        back = _all_to_all(grad, in_splits, out_splits, ctx.group, ctx.traceable)
        return back, None, None, None, None


def _quantized_all_to_all(x: torch.Tensor, out_splits: list[int], in_splits: list[int],
                          group: Any, traceable: bool, precision: str
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows quantized to the precision's wire format (data and scales as uint8), sent:
    (the received rows dequantized, the received wire rows). nvfp4's tensor scale is
    agreed over the group first (a one-element all-reduce of the amax), so every row a
    rank receives shares one and a native GEMM takes them as they are."""
    wire = _all_to_all(pack_rows(x, precision, _group_max(group, traceable)),
                       out_splits, in_splits, group, traceable)
    return unpack_rows(wire, precision, x.shape[-1], x.dtype), wire


def _group_max(group: Any, traceable: bool) -> Callable[[torch.Tensor], torch.Tensor] | None:
    if group is None:  # one rank: its own amax
        return None

    def agree(x: torch.Tensor) -> torch.Tensor:
        if traceable:
            reduced: torch.Tensor = funcol.wait_tensor(funcol.all_reduce(x, "max", group))
            return reduced
        out = x.clone()
        dist.all_reduce(out, op=dist.ReduceOp.MAX, group=group)
        return out

    return agree


class QuantizedAllToAll(torch.autograd.Function):
    """Forward: rows quantized to the precision's wire format (data and scales as
    uint8), sent, dequantized. Backward: the gradient returns in the rows' dtype."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, out_splits: list[int], in_splits: list[int],
                group: Any, traceable: bool, precision: str) -> torch.Tensor:
        ctx.splits, ctx.group, ctx.traceable = (out_splits, in_splits), group, traceable
        return _quantized_all_to_all(x, out_splits, in_splits, group, traceable, precision)[0]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        out_splits, in_splits = ctx.splits
        back = _all_to_all(grad, in_splits, out_splits, ctx.group, ctx.traceable)
        return back, None, None, None, None, None


@dataclass(frozen=True)
class QuantizedWeights:
    """The experts' weights on a precision's grid, made once when the layer is built, so
    that a timed step quantizes only its activations. Each expert's matrix is its own
    tensor (its own nvfp4 tensor scale), in the emulated and the native form alike."""

    precision: str
    emulated: list[torch.Tensor]  # gate, up, down dequantized: [El, in, out], bf16
    native: list[list[Operand]] | None  # gate, up, down: per expert, [out, in] along in


@dataclass
class Experts:
    """This rank's El SwiGLU experts: gate and up D->F, down F->D."""

    gate: torch.Tensor  # [El, D, F]
    up: torch.Tensor  # [El, D, F]
    down: torch.Tensor  # [El, F, D]
    quantized: QuantizedWeights | None = None  # see quantize_experts

    def parameters(self) -> list[torch.Tensor]:
        return [self.gate, self.up, self.down]

    def with_parameters(self, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor
                        ) -> Experts:
        """Other tensors of the same values (detached, copied), the quantized form kept."""
        return Experts(gate, up, down, self.quantized)


def make_experts(shape_d: int, f: int, first_expert: int, count: int, seed: int,
                 dtype: torch.dtype, device: torch.device) -> Experts:
    """Weights drawn per global expert from the seed, so any rank can rebuild any expert.
    Drawn on ``device`` by its own generator (a large case's ~10^9 numbers took the host
    minutes), one expert's float32 draw at a time, so the transient is one expert's."""
    tensors = []
    for which, (rows, cols) in enumerate([(shape_d, f), (shape_d, f), (f, shape_d)]):
        out = torch.empty((count, rows, cols), dtype=dtype, device=device)
        for e in range(count):
            g = torch.Generator(device=device).manual_seed(
                seed * 7919 + (first_expert + e) * 3 + which + 1)
            out[e] = torch.randn(rows, cols, generator=g, device=device).mul_(rows ** -0.5)
        tensors.append(out)
    gate, up, down = tensors
    return Experts(gate, up, down)


def quantize_experts(experts: Experts, precision: str, native: bool) -> Experts:
    """``experts`` with their weights quantized once for ``precision`` (``native``: also
    as ``torch._scaled_mm`` operands); bf16 needs nothing."""
    if precision == "bf16":
        return experts
    with torch.no_grad():
        params = [w.detach() for w in experts.parameters()]
        emulated = [_on_grid(w, precision) for w in params]
        operands = [_operands(w, precision) for w in params] if native else None
    return Experts(experts.gate, experts.up, experts.down,
                   QuantizedWeights(precision, emulated, operands))


def _on_grid(w: torch.Tensor, precision: str) -> torch.Tensor:
    """[El, in, out] on the grid, each expert its own tensor; blocks along ``in`` (the
    GEMM's reduction dimension)."""
    return torch.stack([fake_quantize(m.t(), precision).t() for m in w.unbind(0)])


def _operands(w: torch.Tensor, precision: str) -> list[Operand]:
    return [quantize_operand(m.t().contiguous(), precision) for m in w.unbind(0)]


class StraightThrough(torch.autograd.Function):
    """Forward: the weight as quantized when the layer was built; backward: the gradient
    goes to the weight unchanged (the straight-through estimator of ``fake_quantize``)."""

    @staticmethod
    def forward(ctx: Any, weight: torch.Tensor, quantized: torch.Tensor) -> torch.Tensor:
        return quantized.view_as(quantized)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        return grad, None


def expert_weights(experts: Experts, precision: str) -> list[torch.Tensor]:
    """gate, up, down on the precision's grid: the ones made when the layer was built, or
    (experts built without them, e.g. in tests) quantized now, by the same recipe."""
    if precision == "bf16":
        return experts.parameters()
    q = experts.quantized
    if q is None or q.precision != precision:
        return [_on_grid(w, precision) for w in experts.parameters()]
    return [StraightThrough.apply(w, wq) if w.requires_grad else wq
            for w, wq in zip(experts.parameters(), q.emulated, strict=True)]


# (rows, experts, rows per expert, cumulative offsets, precision, rows already on the
# precision's grid: a quantized dispatch delivered them so, and they are not rounded again;
# the same rows as the wire delivered them, a native GEMM's operand: see dispatch_wire)
ExpertFn = Callable[[torch.Tensor, Experts, list[int], torch.Tensor, str, bool,
                     Operand | None], torch.Tensor]


def _rows_on_grid(rows: torch.Tensor, precision: str, on_grid: bool) -> torch.Tensor:
    return rows if on_grid else fake_quantize(rows, precision)


@dataclass
class KernelUsage:
    """Which expert kernels ran since the last ``reset`` (a case's timed passes), so a
    case names the kernel its times come from. Not recorded while torch.compile traces
    (a compiled call runs no Python): mega records through ``recording``."""

    names: set[str] = field(default_factory=set)

    def reset(self) -> None:
        self.names.clear()

    def record(self, name: str) -> None:
        if not torch.compiler.is_compiling():
            self.names.add(name)

    @property
    def kernel(self) -> str | None:
        """"grouped_mm", "loop", "scaled_mm_loop", several joined by "+", None if none ran."""
        return "+".join(sorted(self.names)) or None


EXPERT_KERNELS = KernelUsage()


def experts_loop(rows: torch.Tensor, experts: Experts, counts: list[int], offs: torch.Tensor,
                 precision: str, on_grid: bool = False, wire: Operand | None = None
                 ) -> torch.Tensor:
    """Expert by expert: the fallback where ``torch._grouped_mm`` does not run."""
    EXPERT_KERNELS.record("loop")
    gate, up, down = expert_weights(experts, precision)
    x = _rows_on_grid(rows, precision, on_grid)
    if not counts:
        return rows.new_zeros((0, experts.down.shape[-1]))
    starts = list(itertools.accumulate(counts, initial=0))
    hidden = torch.cat([F.silu(x[a:b] @ gate[e]) * (x[a:b] @ up[e])
                        for e, (a, b) in enumerate(itertools.pairwise(starts))])
    # The hidden activation quantized once over all experts' rows (nvfp4: one tensor
    # scale), as the grouped and the native GEMMs do.
    h = fake_quantize(hidden, precision)
    return torch.cat([h[a:b] @ down[e] for e, (a, b) in enumerate(itertools.pairwise(starts))])


def experts_grouped(rows: torch.Tensor, experts: Experts, counts: list[int],
                    offs: torch.Tensor, precision: str, on_grid: bool = False,
                    wire: Operand | None = None) -> torch.Tensor:
    """All experts in one ``torch._grouped_mm`` per GEMM (gate, up, down); ``offs``: the
    int32 end row of each expert's group (empty groups repeat the previous end)."""
    EXPERT_KERNELS.record("grouped_mm")
    gate, up, down = expert_weights(experts, precision)
    x = _rows_on_grid(rows, precision, on_grid)
    h = F.silu(torch._grouped_mm(x, gate, offs=offs)) * torch._grouped_mm(x, up, offs=offs)
    y: torch.Tensor = DenseGrad.apply(
        torch._grouped_mm(fake_quantize(h, precision), down, offs=offs))
    return y


class DenseGrad(torch.autograd.Function):
    """Identity whose backward makes the incoming gradient dense: ``_grouped_mm``'s
    backward rejects stride-0 gradients ("Invalid strides/sizes, got [0, 0]"), which is
    what ``y.sum().backward()`` sends (an expanded scalar)."""

    @staticmethod
    def forward(ctx: Any, y: torch.Tensor) -> torch.Tensor:
        return y.view_as(y)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad.contiguous()


EMULATED_KERNELS: dict[ExpertFn, str] = {experts_loop: "loop", experts_grouped: "grouped_mm"}


def recording(fn: ExpertFn, compiled: ExpertFn) -> ExpertFn:
    """``compiled`` (torch.compile of ``fn``, which runs no Python when called) recording
    ``fn``'s kernel in ``EXPERT_KERNELS`` at each call."""
    name = EMULATED_KERNELS[fn]

    def run(*args: Any) -> torch.Tensor:
        EXPERT_KERNELS.record(name)
        return compiled(*args)

    return run


def experts_native(fallback: ExpertFn) -> ExpertFn:
    """Expert by expert through native block-scaled GEMMs (``runner.native``) when no
    gradient is needed; ``fallback`` (emulated) otherwise. Counted in ``USAGE``. The
    weights come quantized from the build; the rows as the wire delivered them (``wire``)
    or else quantized once over all experts' rows (one tensor scale, as the emulation
    does), and the hidden activation quantized once over all experts' rows."""
    def run(rows: torch.Tensor, experts: Experts, counts: list[int], offs: torch.Tensor,
            precision: str, on_grid: bool = False, wire: Operand | None = None
            ) -> torch.Tensor:
        if precision == "bf16":
            return fallback(rows, experts, counts, offs, precision, on_grid, None)
        if torch.is_grad_enabled():
            USAGE.emulated += 1
            return fallback(rows, experts, counts, offs, precision, on_grid, None)
        USAGE.native += 1
        EXPERT_KERNELS.record("scaled_mm_loop")
        if rows.shape[0] == 0:
            return rows.new_zeros((0, experts.down.shape[-1]))
        q = experts.quantized
        gate, up, down = (q.native if q is not None and q.precision == precision
                          and q.native is not None else
                          [_operands(w, precision) for w in experts.parameters()])
        starts = list(itertools.accumulate(counts, initial=0))
        ranges = [(e, starts[e], starts[e] + n) for e, n in enumerate(counts) if n]
        x = wire if wire is not None else quantize_operand(rows, precision)
        hidden = torch.cat([F.silu(gemm(x.rows(a, b), gate[e], precision))
                            * gemm(x.rows(a, b), up[e], precision) for e, a, b in ranges])
        h = quantize_operand(hidden, precision)
        return torch.cat([gemm(h.rows(a, b), down[e], precision) for e, a, b in ranges])

    return run


@dataclass(frozen=True)
class GroupedProbe:
    runs: bool
    reason: str | None  # why the experts loop instead, when it does not run


# GroupedBlas.cpp (torch 2.8-2.13): _grouped_mm's CUDA kernel (CUTLASS, no host sync) runs
# for bf16 on compute capability 9.x and 10.x only; elsewhere it falls back to a loop over
# the groups after copying the offsets to the host, which no CUDA graph can capture.
GROUPED_MM_CAPABILITIES = (9, 10)


def grouped_mm_probe(device: torch.device) -> GroupedProbe:
    """Whether ``experts_grouped`` runs here: forward and backward on a tiny bf16 problem
    with an empty expert and groups of unaligned sizes (the unpadded pipelines send any
    count; the backward's weight gradient groups along them), against a matmul per expert."""
    if not hasattr(torch, "_grouped_mm"):
        return GroupedProbe(False, f"torch {torch.__version__} has no torch._grouped_mm "
                                   f"(added in 2.8)")
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if major not in GROUPED_MM_CAPABILITIES:
            return GroupedProbe(False, (
                f"sm_{major}{minor}: torch._grouped_mm's grouped kernel runs on sm_90 and "
                f"sm_100 only; elsewhere it loops over the groups after a device-to-host "
                f"copy of the offsets (no CUDA graph can capture it)"))
    try:
        g = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(48, 32, generator=g, device=device).to(torch.bfloat16)
        w = torch.randn(3, 32, 16, generator=g, device=device).to(torch.bfloat16)
        x.requires_grad_(True)
        w.requires_grad_(True)
        counts = [5, 0, 43]  # unaligned groups, as the standard pipeline sends them
        offs = torch.tensor(counts, device=device).cumsum(0).to(torch.int32)
        y = torch._grouped_mm(x, w, offs=offs)
        grad = torch.randn(y.shape, generator=g, device=device).to(torch.bfloat16)
        y.backward(grad)
        xs, gs = x.detach().float().split(counts), grad.float().split(counts)
        want_y = torch.cat([a @ w[e].detach().float() for e, a in enumerate(xs)])
        want_dx = torch.cat([b @ w[e].detach().float().t() for e, b in enumerate(gs)])
        want_dw = torch.stack([a.t() @ b for a, b in zip(xs, gs, strict=True)])
        assert x.grad is not None and w.grad is not None
        wrong = [name for name, got, want in (("output", y, want_y), ("input gradient",
                                              x.grad, want_dx), ("weight gradient",
                                              w.grad, want_dw))
                 if not torch.allclose(got.float(), want, rtol=2e-2, atol=5e-2)]
        if wrong:
            return GroupedProbe(False, f"torch._grouped_mm's {', '.join(wrong)} disagreed "
                                       f"with a matmul per expert")
        return GroupedProbe(True, None)
    except (RuntimeError, AttributeError, NotImplementedError, TypeError, ValueError) as exc:
        return GroupedProbe(False, f"torch._grouped_mm failed: {type(exc).__name__}: "
                                   f"{str(exc)[:300]}")


def grouped_mm_runs(device: torch.device) -> bool:
    return grouped_mm_probe(device).runs


def pad_index(counts: list[int], group: int = GROUP_ROWS) -> tuple[torch.Tensor, list[int]]:
    """Where each expert-ordered row lands when every expert's group is padded to
    ``group`` rows, and the padded counts."""
    padded = [-(-n // group) * group for n in counts]
    index: list[int] = []
    start = 0
    for n, p in zip(counts, padded, strict=True):
        index.extend(range(start, start + n))
        start += p
    return torch.tensor(index, dtype=torch.int64), padded


@dataclass
class DeviceRouting:
    """A stage's routing with every index already on the device (nothing is copied from
    the host inside the step, so it can be captured in a CUDA graph)."""

    token: torch.Tensor
    weight: torch.Tensor
    order: torch.Tensor
    send_splits: list[int]
    recv_splits: list[int]
    counts: list[int]  # rows per expert as the GEMMs see them (padded or not)
    offs: torch.Tensor  # int32 cumulative counts
    pad: torch.Tensor | None  # expert-ordered row -> padded row

    @property
    def gemm_rows(self) -> int:
        return sum(self.counts)


def prepare(routing: RankRouting, device: torch.device, dtype: torch.dtype,
            pad_groups: bool) -> DeviceRouting:
    counts = routing.expert_counts
    pad = None
    if pad_groups:
        index, counts = pad_index(counts)
        pad = index.to(device)
    offs = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(torch.int32).to(device)
    return DeviceRouting(
        token=routing.send_token.to(device), weight=routing.send_weight.to(device, dtype),
        order=routing.recv_order.to(device), send_splits=routing.send_splits,
        recv_splits=routing.recv_splits, counts=counts, offs=offs, pad=pad)


@dataclass
class PassConfig:
    precision: str
    quantized_dispatch: bool
    pad_groups: bool
    expert_fn: ExpertFn
    group: Any
    traceable: bool = False  # functional collectives, for torch.compile (mega)
    # runner.dispatch.Exchange: a dynamic or deduplicating dispatch and its combine; None:
    # the static exchange below (splits known on the host)
    exchange: Any = None
    # The received wire rows go on to the experts (dispatch_wire): native GEMMs take them
    wire_to_gemm: bool = False


def _experts(ordered: torch.Tensor, r: DeviceRouting, experts: Experts, cfg: PassConfig,
             wire: torch.Tensor | None = None) -> torch.Tensor:
    """``wire``: the same rows as they came off the wire (see dispatch_wire), padded
    alike (zero bytes decode to zero)."""
    width = ordered.shape[1]
    if r.pad is not None:
        ordered = ordered.new_zeros((r.gemm_rows, width)).index_copy(0, r.pad, ordered)
        if wire is not None:
            wire = wire.new_zeros((r.gemm_rows, wire.shape[1])).index_copy(0, r.pad, wire)
    operand = None if wire is None else wire_operand(wire, cfg.precision, width)
    y = cfg.expert_fn(ordered, experts, r.counts, r.offs, cfg.precision,
                      cfg.quantized_dispatch, operand)
    return y if r.pad is None else y.index_select(0, r.pad)


def dispatch(x: torch.Tensor, r: DeviceRouting, cfg: PassConfig) -> torch.Tensor:
    """This rank's rows to their experts' ranks (quantized on the wire if so configured)."""
    mark = CLOCK.begin("dispatch", r)
    recv = _dispatch(x, r, cfg)
    CLOCK.end(mark)
    return recv


def _dispatch(x: torch.Tensor, r: DeviceRouting, cfg: PassConfig) -> torch.Tensor:
    if cfg.exchange is not None:
        rows: torch.Tensor = cfg.exchange.dispatch(x, r, cfg)[0]
        return rows
    rows = x.index_select(0, r.token)
    recv: torch.Tensor
    if cfg.quantized_dispatch:
        recv = QuantizedAllToAll.apply(rows, r.recv_splits, r.send_splits, cfg.group,
                                       cfg.traceable, cfg.precision)
    else:
        recv = AllToAll.apply(rows, r.recv_splits, r.send_splits, cfg.group, cfg.traceable)
    return recv


def dispatch_wire(x: torch.Tensor, r: DeviceRouting, cfg: PassConfig
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``dispatch``, and the received wire rows too where a native GEMM takes them as its
    operand with the senders' scales (``native.wire_operand``), so they are not quantized
    again. Without gradients only: training needs ``QuantizedAllToAll``'s backward."""
    if not (cfg.wire_to_gemm and cfg.quantized_dispatch and not torch.is_grad_enabled()):
        return dispatch(x, r, cfg), None
    mark = CLOCK.begin("dispatch", r)
    received: tuple[torch.Tensor, torch.Tensor | None] = (
        cfg.exchange.dispatch(x, r, cfg) if cfg.exchange is not None else
        _quantized_all_to_all(x.index_select(0, r.token), r.recv_splits, r.send_splits,
                              cfg.group, cfg.traceable, cfg.precision))
    CLOCK.end(mark)
    return received


def expert_rows(recv: torch.Tensor, r: DeviceRouting, experts: Experts, cfg: PassConfig,
                wire: torch.Tensor | None = None) -> torch.Tensor:
    """Received rows -> expert order -> experts -> back in received order. The experts are
    the local work between the two collectives, so they run OOM-guarded (forward and,
    when training, backward): a rank out of memory sends zeros on to the combine (and zero
    gradients back to the dispatch) rather than leave its peers waiting there."""
    mark = CLOCK.begin("experts", r)
    ordered = recv.index_select(0, r.order)
    y = guarded_experts(ordered, r, experts, cfg,
                        None if wire is None else wire.index_select(0, r.order))
    back = torch.empty_like(y).index_copy(0, r.order, y)
    CLOCK.end(mark)
    return back


# The guard is host code that catches an error at run time, which a compiled graph
# cannot hold: torch.compile (mega) breaks its graph here and runs this eagerly (the
# experts inside are compiled on their own, see runner.pipelines.mega_forward).
@torch.compiler.disable  # type: ignore[untyped-decorator]
def guarded_experts(ordered: torch.Tensor, r: DeviceRouting, experts: Experts,
                     cfg: PassConfig, wire: torch.Tensor | None = None) -> torch.Tensor:
    tensors = (ordered, *experts.parameters())
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        y: torch.Tensor = GuardedExperts.apply(r, cfg, experts.quantized, *tensors)
        return y
    return guarded(lambda: _experts(ordered, r, experts, cfg, wire),
                   lambda: ordered.new_zeros(ordered.shape))


class GuardedExperts(torch.autograd.Function):
    """The experts as one autograd node whose forward and backward both run ``guarded``.
    The forward records the experts' own autograd graph (under ``enable_grad``), the
    backward differentiates it: the same work as without the node, but an OOM in the
    backward is caught here and zero gradients go on to the dispatch's transposed
    collective, which every rank then still reaches."""

    @staticmethod
    def forward(ctx: Any, r: DeviceRouting, cfg: PassConfig,
                quantized: QuantizedWeights | None, ordered: torch.Tensor,
                gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
        inputs = [t.detach().requires_grad_(t.requires_grad)
                  for t in (ordered, gate, up, down)]
        experts = Experts(inputs[1], inputs[2], inputs[3], quantized)
        with torch.enable_grad():
            y = guarded(lambda: _experts(inputs[0], r, experts, cfg),
                        lambda: ordered.new_zeros(ordered.shape))
        ctx.inputs, ctx.y = inputs, y
        return y.detach()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        inputs: list[torch.Tensor] = ctx.inputs
        y: torch.Tensor = ctx.y
        ctx.inputs = ctx.y = None  # the inner graph is spent

        def zeros() -> list[torch.Tensor]:
            return [torch.zeros_like(t) for t in inputs]

        def differentiate() -> list[torch.Tensor]:
            if y.grad_fn is None:  # the forward ran out of memory: zeros, no graph
                return zeros()
            wanted = [t for t in inputs if t.requires_grad]
            found = iter(torch.autograd.grad(y, wanted, grad, allow_unused=True))
            out = []
            for t in inputs:
                g = next(found) if t.requires_grad else None
                out.append(torch.zeros_like(t) if g is None else g)
            return out

        grads = guarded(differentiate, zeros, backward=True)
        return None, None, None, *grads


def combine(back: torch.Tensor, r: DeviceRouting, cfg: PassConfig, out: torch.Tensor) -> None:
    """The expert outputs home again, score-weighted and summed into ``out``."""
    mark = CLOCK.begin("combine", r)
    if cfg.exchange is not None:
        cfg.exchange.combine(back, r, cfg, out)
    else:
        returned = AllToAll.apply(back, r.send_splits, r.recv_splits, cfg.group,
                                  cfg.traceable)
        out.index_add_(0, r.token, returned * r.weight[:, None])
    CLOCK.end(mark)


def routed_pass(x: torch.Tensor, r: DeviceRouting, experts: Experts, cfg: PassConfig,
                out: torch.Tensor) -> None:
    """Dispatch, permute to expert order, experts, combine, score-weighted sum into out."""
    recv, wire = dispatch_wire(x, r, cfg)
    combine(expert_rows(recv, r, experts, cfg, wire), r, cfg, out)
