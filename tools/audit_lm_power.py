"""False alarms and planted errors of the sentence rewriters' release-path audit cases (issue 29).

Every audit here is the full one of ``textdp audit NAME --conformance`` (event, curve and conformance
tests) on the case the registry builds (``audit_case(NAME)``: the rewriter through ``privatize_batch`` on
its tiny model, audit/lm_release.py and audit/generation.py), at the case's default samples (10^4 per
input) unless ``--samples``. An error is planted from outside the library in the step the release loop
calls, in every loaded ``textdp.generation`` module that binds it:

``none``
    nothing planted: the false alarms;
``eps3``, ``eps1.5``, ``eps1.25``
    the step's ε multiplied (LM rewriters: ``exponential_step``'s ``epsilon``; ER-AE: ``two_set_step``'s
    ``epsilon_set`` and ``epsilon_word``) while the claim stays;
``noclip``
    LM token rewriters: ``clipped_log_weights`` without the clipping (temperature ``2Δ/ε`` on raw logits);
    DP-BART: ``clip_and_noise`` without the clipping (the probe's encoder rows are ``±5``, the clip ``±1``);
``nonoise``, ``sigma/2``, ``sigma*0.8``, ``sigma*0.9``
    DP-BART: ``clip_and_noise`` with σ = 0, σ/2, 0.8 σ or 0.9 σ.

Repetition ``r`` of every cell uses seed ``first_seed + r`` (fixed up front). One line per audit on stdout,
then a markdown table (flagged / runs; the privacy tests alone; the conformance test alone; seconds per
audit)::

    nice -n 10 python tools/audit_lm_power.py --cases er-ae --plants none,eps1.5,eps1.25 --reps 10
    nice -n 10 python tools/audit_lm_power.py --cases dp-prompt --plants none,eps3,eps1.5,noclip --reps 4
    nice -n 10 python tools/audit_lm_power.py --cases dp-bart --plants none --reps 10
    nice -n 10 python tools/audit_lm_power.py --cases dp-bart --plants sigma/2,sigma*0.8,noclip --reps 8
    nice -n 10 python tools/audit_lm_power.py --cases dp-bart-range,dp-bart-shared-noise --plants none --reps 4
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from typing import Any

PLANTS = ("none", "eps3", "eps1.5", "eps1.25", "noclip", "nonoise", "sigma/2", "sigma*0.8", "sigma*0.9")
SIGMA = {"nonoise": 0.0, "sigma/2": 0.5, "sigma*0.8": 0.8, "sigma*0.9": 0.9}
FACTORS = {"eps3": 3.0, "eps1.5": 1.5, "eps1.25": 1.25}


def _bound_in_generation(attr: str) -> list[Any]:
    """Every loaded ``textdp.generation`` module that binds ``attr``."""
    return [m for m in list(sys.modules.values())
            if getattr(m, "__name__", "").startswith("textdp.generation") and getattr(m, attr, None) is not None]


class Planter:
    """Replaces a step in every ``textdp.generation`` module that binds it, and puts the originals back."""

    def __init__(self) -> None:
        import textdp.generation.decoding
        import textdp.generation.lm_decode
        import textdp.generation.rewriter
        import textdp.generation.sampling  # noqa: F401  (loaded, so every module binding a step is found)

        self.saved: list[tuple[Any, str, Any]] = []

    def set(self, attr: str, make: Callable[[Any], Any]) -> None:
        mods = _bound_in_generation(attr)
        original = getattr(mods[0], attr)
        for m in mods:
            if getattr(m, attr) is original:
                self.saved.append((m, attr, original))
                setattr(m, attr, make(original))

    def reset(self) -> None:
        for m, attr, original in reversed(self.saved):
            setattr(m, attr, original)
        self.saved.clear()


def plant(p: Planter, name: str, case: str) -> None:
    """Plant error ``name`` for ``case`` (module docstring)."""
    import torch

    if name == "none":
        return
    if name in FACTORS:
        f = FACTORS[name]
        if case == "er-ae":
            p.set("two_set_step", lambda step: lambda logp, rng, *, epsilon_set, epsilon_word, **kw: step(
                logp, rng, epsilon_set=f * epsilon_set, epsilon_word=f * epsilon_word, **kw))
        else:
            p.set("exponential_step", lambda step: lambda scores, rng, *, epsilon, **kw: step(
                scores, rng, epsilon=f * epsilon, **kw))
    elif name == "noclip" and case == "dp-bart":
        def noise_only(_original: Any) -> Any:
            def planted(h: Any, bounds: Any, sigma: float, rng: Any) -> Any:
                x = torch.as_tensor(h).to(torch.float64)
                return x + float(sigma) * torch.from_numpy(rng.standard_normal(tuple(x.shape)))
            return planted
        p.set("clip_and_noise", noise_only)
    elif name == "noclip":
        def unclipped(_original: Any) -> Any:
            def planted(scores: Any, *, epsilon: float, bounds: Any, allowed: Any = None) -> Any:
                lw = torch.as_tensor(scores).to(torch.float64, copy=True) * (epsilon / (2.0 * bounds.width))
                if allowed is not None:
                    lw = lw.masked_fill(~torch.as_tensor(allowed, dtype=torch.bool).expand_as(lw), -math.inf)
                return lw - lw.max(dim=1, keepdim=True).values
            return planted
        p.set("clipped_log_weights", unclipped)
    elif name in SIGMA:
        c = SIGMA[name]
        p.set("clip_and_noise", lambda cn: lambda h, b, s, r: cn(h, b, c * s, r))
    else:
        raise SystemExit(f"unknown plant {name!r}; choose from {', '.join(PLANTS)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="er-ae,dp-prompt,dp-paraphrase,dp-mlm,dp-bart")
    ap.add_argument("--plants", default="none,eps3,eps1.5")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--first-seed", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=None, help="per input (default: the case's own)")
    args = ap.parse_args(argv)

    import torch

    from textdp.audit import audit_case, run_audit

    torch.set_num_threads(1)
    planter = Planter()
    rows = []
    for name in args.cases.split(","):
        case = audit_case(name)  # built once, unpatched (the tiny model and the reference law)
        for pl in args.plants.split(","):
            planter.reset()
            plant(planter, pl, name)
            flagged = privacy = conformance = 0
            seconds = 0.0
            for r in range(args.reps):
                seed = args.first_seed + r
                t = time.perf_counter()
                res = run_audit(case, samples=args.samples, seed=seed, conformance=True)
                seconds += time.perf_counter() - t
                flagged += not res.passed
                privacy += not res.privacy_passed
                conformance += res.conformance is not None and not res.conformance.passed
                excess = res.curve.excess if res.curve is not None else float("nan")
                p_conf = res.conformance.p_value if res.conformance is not None else float("nan")
                print(f"{name} {pl} seed={seed} passed={res.passed} privacy={res.privacy_passed} "
                      f"event_lb={res.lower_bound:.3f} claim={res.claimed_epsilon:.4g} curve_excess={excess:.4f} "
                      f"conformance_p={p_conf:.3g}", flush=True)
            rows.append((name, pl, flagged, privacy, conformance, args.reps, seconds / args.reps))
    planter.reset()
    print("\n| case | planted | flagged | privacy tests flagged | conformance flagged | s/audit |")
    print("|---|---|---|---|---|---|")
    for name, pl, f, pr, c, n, s in rows:
        print(f"| {name} | {pl} | {f}/{n} | {pr}/{n} | {c}/{n} | {s:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
