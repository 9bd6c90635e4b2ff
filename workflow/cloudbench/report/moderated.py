"""Two campaigns' rates, measurement by measurement, with the noise shared between measurements:
the moderated t-test of small-sample genomics (Smyth 2004, limma's eBayes), on log rates.

Why not a test per measurement on its own: at the handful of repeats a campaign has, a
measurement alone says little about its own noise. An exact rank test of 6 against 6 repeats
has a smallest p of 1/924, which a correction over 24 measurements cannot pass often enough:
one route's 25% drop (10% noise) was found in a quarter of campaign pairs. But 24 routes
through one store say a great deal about noise together. So, per measurement g, on the log
rates of campaigns A and B:

* its change is ``delta_g`` = mean log rate of B - of A (the factor exp(delta_g) is the ratio
  of geometric means), its own spread ``s_g^2`` the pooled within-campaign variance on
  ``d_g = n_a + n_b - 2`` degrees of freedom;
* a prior for the variances from all measurements compared: ``s_g^2`` scaled chi-square around
  ``s0^2`` with ``d0`` prior degrees of freedom, fitted by moments of log s^2 (limma's
  fitFDist): d0 is large when the measurements share one noise and small when they do not (5%
  on some routes, 20% on others), so a route is not lent a noise much smaller than its own;
* each route's own spread, shrunk toward the pool, not replaced by it: a route whose spread
  the pool cannot explain (``s_g^2 / s0^2`` beyond the F(d_g, d0) distribution's
  ``P_NOISIER`` upper or ``P_QUIETER`` lower tail) keeps its own (``own_noise``; d0 = 0 for
  it). One prior for all lent one quiet route among 23 at 20% their noise (its 25% drop found
  in 49% of pairs, now 90%) and one noisy route among 23 quiet ones theirs (unchanged pairs
  flagged in 7% at 3 repeats, now 2.5%). The lower tail is the stricter: a route that keeps
  a spread small by chance is tested against too small a noise, one that keeps a large one
  only loses power (at 1% of routes, about half a point on a lone drop at 10% noise);
* each measurement's posterior variance ``(d0 s0^2 + d_g s_g^2) / (d0 + d_g)`` and the
  moderated t with ``d0 + d_g`` degrees of freedom (normal when d0 is infinite), against the
  margin: one-sided p-values of "B is more than ``margin`` slower" and of "more than
  ``margin`` faster";
* two families over the measurements, Benjamini-Hochberg each: the slower verdicts at
  ``SLOWER_SHARE`` of the false discovery rate (4% of 5%), the faster ones at the rest (1%).
  When nothing moved by more than the margin, a comparison then flags anything, slower or
  faster, at most 5% of the time (the two families' chances add), and a regression, which is
  what a centre acts on, has most of it: with one drop among 24 its threshold is 0.04/24
  against 0.025/24 for an even split, worth 4 points of power at 6 repeats (85% against 81%).

A stalled repeat (a store outage waited out, one repeat several times slower) would otherwise
read as a change of its measurement's mean and, with a variance shared from the others, be
flagged. So before anything is estimated, a repeat whose log rate lies more than
``SET_ASIDE_SPREADS`` shared spreads (and at least a factor ``SET_ASIDE_FACTOR``) from its
measurement's median in its campaign is set aside and counted (``set_aside``); the shared
spread is the median over measurements of their own spread, which one stall cannot move.
A measurement keeps at least 2 repeats per campaign. What holds then (tests/test_compare_levels):
a stall on a measurement that did not change flags nothing more often than the level allows
(x4 or x2, at 3 or 6 repeats); a stall on the measurement that did change costs it one repeat
(a 25% drop then found in 80% of pairs instead of 85%). A smaller stall (x1.5 at 10% noise)
is kept: its measurement's own variance then outweighs the prior's.

The verdict and the interval printed beside it are one decision: with R_s of the G
measurements found slower at rate q_s = 4%, and R_f found faster at q_f = 1%, each
measurement's interval of its factor runs from the moderated-t bound at one-sided level
``q_f max(R_f, 1) / G`` below to that at ``q_s max(R_s, 1) / G`` above (Benjamini and
Yekutieli's false coverage rate adjustment, 2005), so its level is one minus both; a
measurement is ``slower`` exactly when that interval lies wholly below ``1 - margin``,
``faster`` when wholly above ``1 + margin``. An interval that excludes 1 but not the margin
is "no clear change": a change smaller than the margin.

Every function takes arrays of shape (..., G, N): leading axes are independent comparisons
(thousands of simulated pairs at once), G the measurements compared, N repeats padded with NaN.
scipy is not a dependency: the t distribution's tail is the regularized incomplete beta
function (continued fraction, Numerical Recipes 6.4).
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np

MIN_REPEATS = 3  # ok repeats each campaign needs for a verdict (fewer: "too few repeats")
SET_ASIDE_SPREADS = 6.0  # a repeat this many shared spreads from its median is a stall
SET_ASIDE_FACTOR = 2.0  # ... and at least this factor from it, however quiet the store
MIN_KEPT = 2  # repeats per campaign a measurement keeps, whatever is set aside
# of the false discovery rate, the share spent on "slower" (the rest on "faster"): module doc
SLOWER_SHARE = 0.8
MIN_FOR_PRIOR = 3  # measurements needed to share noise; fewer: each test stands alone
# a route keeps its own spread when the pool's F(d_g, d0) puts it beyond these tails (module doc)
P_NOISIER = 0.01
P_QUIETER = 0.001
# beyond this many degrees of freedom t is the normal: at the tails used here (t ~ 3-4) the
# two differ by under 0.5% of p, and the continued fraction would need thousands of terms
NORMAL_DF = 10_000


def _lgamma(x: np.ndarray) -> np.ndarray:
    """log Gamma(x) for x > 0: recurrence up to 8, then Stirling's series (error under 1e-12;
    math.lgamma elementwise took a third of a simulation's time)."""
    x = np.asarray(x, dtype=float).copy()
    acc = np.zeros_like(x)
    while (small := x < 8.0).any():
        acc = acc - np.where(small, np.log(np.where(small, x, 1.0)), 0.0)
        x = np.where(small, x + 1.0, x)
    inv, inv2 = 1.0 / x, 1.0 / (x * x)
    series = inv * (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 / 1680)))
    return acc + (x - 0.5) * np.log(x) - x + 0.5 * math.log(2 * math.pi) + series


_erfc = np.vectorize(math.erfc, otypes=[float])


class Moderated(NamedTuple):
    """Per measurement (arrays of shape (..., G)) and per comparison (shape (...))."""

    n_a: np.ndarray  # repeats kept in A
    n_b: np.ndarray
    set_aside: np.ndarray  # repeats set aside as stalls or flukes, both campaigns
    ratio: np.ndarray  # exp(delta): B's geometric-mean rate over A's
    p_slower: np.ndarray  # one-sided moderated-t p of "more than margin slower"
    p_faster: np.ndarray
    low: np.ndarray  # the factor's interval at ``level``
    high: np.ndarray
    level: np.ndarray  # (...): the level every row's interval and verdict use (module doc)
    slower: np.ndarray  # bool
    faster: np.ndarray  # bool
    prior_df: np.ndarray  # (...): d0 (inf: one noise for all)
    prior_sd: np.ndarray  # (...): s0, the shared spread of log rates
    own_noise: np.ndarray  # bool (..., G): tested with its own spread, unlike the pool's


# --- special functions -----------------------------------------------------------------------


def _betacf(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The continued fraction of the incomplete beta function (modified Lentz), iterated
    only on the elements not yet converged."""
    tiny, eps = 1e-300, 1e-14

    def safe(v: np.ndarray) -> np.ndarray:
        return np.where(np.abs(v) < tiny, tiny, v)

    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 / safe(1.0 - qab * x / qap)
    h = d.copy()
    live = np.arange(x.size)
    for m in range(1, 1000):
        if live.size == 0:
            break
        aa_, bb_, xx, qb, qp, qm = a[live], b[live], x[live], qab[live], qap[live], qam[live]
        m2 = 2 * m
        aa = m * (bb_ - m) * xx / ((qm + m2) * (aa_ + m2))
        dd = 1.0 / safe(1.0 + aa * d[live])
        cc = safe(1.0 + aa / c[live])
        hh = h[live] * dd * cc
        aa = -(aa_ + m) * (qb + m) * xx / ((aa_ + m2) * (qp + m2))
        dd = 1.0 / safe(1.0 + aa * dd)
        cc = safe(1.0 + aa / cc)
        step = dd * cc
        h[live], d[live], c[live] = hh * step, dd, cc
        live = live[np.abs(step - 1.0) >= eps]
    return h


def betainc(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The regularized incomplete beta function I_x(a, b), elementwise (a, b > 0)."""
    a, b, x = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, b, x)))
    out = np.where(x <= 0, 0.0, 1.0)
    inside = (x > 0) & (x < 1)
    if not inside.any():
        return out
    a, b, x = a[inside], b[inside], x[inside]
    front = np.exp(_lgamma(a + b) - _lgamma(a) - _lgamma(b) + a * np.log(x) + b * np.log1p(-x))
    direct = x < (a + 1.0) / (a + b + 2.0)
    value = np.empty_like(x)
    if direct.any():
        i = direct
        value[i] = front[i] * _betacf(a[i], b[i], x[i]) / a[i]
    if (~direct).any():
        i = ~direct
        value[i] = 1.0 - front[i] * _betacf(b[i], a[i], 1.0 - x[i]) / b[i]
    out[inside] = value
    return out


def t_sf(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """P(T > t) for Student's t with ``df`` degrees of freedom (beyond ``NORMAL_DF``: the
    normal)."""
    t, df = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(df, dtype=float))
    out = np.full(t.shape, np.nan)
    normal = (df > NORMAL_DF) & ~np.isnan(t)
    out[normal] = 0.5 * _erfc(t[normal] / math.sqrt(2.0))
    finite = (df <= NORMAL_DF) & (df > 0) & ~np.isnan(t)
    if finite.any():
        tt, dd = t[finite], df[finite]
        tail = 0.5 * betainc(dd / 2.0, 0.5, dd / (dd + tt * tt))
        out[finite] = np.where(tt > 0, tail, 1.0 - tail)
    return out


def t_isf(p: np.ndarray, df: np.ndarray) -> np.ndarray:
    """The t with P(T > t) = p (0 < p < 1/2), by bisection on t_sf (monotone) then Newton's
    method, once per distinct (p, df): a comparison's rows share one level and mostly one df."""
    p, df = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(df, dtype=float))
    key = np.empty(p.size, dtype=complex)  # one sortable key per (p, df); df beyond
    key.real, key.imag = p.ravel(), np.minimum(df.ravel(), 2 * NORMAL_DF)  # NORMAL_DF: normal
    keys, back = np.unique(key, return_inverse=True)
    return _t_isf(keys.real, keys.imag)[back.ravel()].reshape(p.shape)


def t_pdf(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Student's t density (beyond ``NORMAL_DF``: the normal's)."""
    t, df = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(df, dtype=float))
    nu = np.minimum(df, NORMAL_DF)
    log_t = (
        _lgamma((nu + 1) / 2) - _lgamma(nu / 2) - 0.5 * np.log(nu * math.pi)
        - (nu + 1) / 2 * np.log1p(t * t / nu)
    )  # fmt: skip
    return np.where(df > NORMAL_DF, np.exp(-t * t / 2) / math.sqrt(2 * math.pi), np.exp(log_t))


def _normal_isf(p: np.ndarray) -> np.ndarray:
    """The z with P(Z > z) = p (0 < p <= 1/2) to within 5e-4: Abramowitz and Stegun 26.2.23,
    a starting point for Newton's method, not an answer."""
    u = np.sqrt(-2.0 * np.log(p))
    return u - (2.515517 + u * (0.802853 + u * 0.010328)) / (
        1.0 + u * (1.432788 + u * (0.189269 + u * 0.001308))
    )


def _t_guess(p: np.ndarray, df: np.ndarray) -> np.ndarray:
    """t's quantile from the normal's by the Cornish-Fisher expansion (Abramowitz and Stegun
    26.7.5): within a few parts in a thousand from 3 degrees of freedom; off below that,
    where the bracketed Newton's method of ``_t_isf`` still converges from it."""
    z = _normal_isf(p)
    nu = np.maximum(np.minimum(df, NORMAL_DF), 1.0)
    z2 = z * z
    g1 = z * (z2 + 1) / 4
    g2 = z * (3 + z2 * (16 + 5 * z2)) / 96
    g3 = z * (-15 + z2 * (17 + z2 * (19 + 3 * z2))) / 384
    g4 = z * (-945 + z2 * (-1920 + z2 * (1482 + z2 * (776 + 79 * z2)))) / 92160
    return z + (g1 + (g2 + (g3 + g4 / nu) / nu) / nu) / nu


def _t_isf(p: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Newton's method from the Cornish-Fisher guess, inside a bracket [lo, hi] that every
    step narrows: a step that would leave it bisects instead (df = 1 at tiny p, where the
    guess is far off). Each step costs one t tail (a continued fraction per element), so a
    good start is most of the cost: 3-5 steps where 12 bisections and 5 steps were taken."""
    lo, hi = np.zeros(p.shape), np.maximum(1.0, 2.0 * _t_guess(p, df))
    while True:  # widen until the tail at hi is below p (df = 1 at tiny p reaches far)
        short = t_sf(hi, df) > p
        if not short.any():
            break
        lo, hi = np.where(short, hi, lo), np.where(short, hi * 4.0, hi)
    t = np.clip(_t_guess(p, df), lo, hi)
    for _ in range(60):
        excess = t_sf(t, df) - p  # > 0: t too small
        lo, hi = np.where(excess > 0, t, lo), np.where(excess > 0, hi, t)
        newton = t + excess / t_pdf(t, df)
        inside = (newton >= lo) & (newton <= hi)
        step = np.where(inside, newton, (lo + hi) / 2.0)
        done = np.abs(step - t) <= 1e-13 * np.maximum(1.0, np.abs(t))
        t = step
        if done.all():
            break
    return t


def f_cdf(f: np.ndarray, d1: np.ndarray, d2: np.ndarray) -> np.ndarray:
    """P(F <= f) for Snedecor's F with (d1, d2) degrees of freedom; d2 beyond ``NORMAL_DF``
    (infinite included) is taken as ``NORMAL_DF``, within 1e-4 of chi-square(d1) / d1, which
    a tail at 0.1% does not feel. NaN where f is NaN or d1 is not positive."""
    f, d1, d2 = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (f, d1, d2)))
    out = np.full(f.shape, np.nan)
    ok = ~np.isnan(f) & (d1 > 0) & (d2 > 0)
    if ok.any():
        a, b, x = d1[ok], np.minimum(d2[ok], NORMAL_DF), np.maximum(f[ok], 0.0)
        out[ok] = betainc(a / 2.0, b / 2.0, a * x / (a * x + b))
    return out


def _psi_terms(x: np.ndarray, order: int) -> np.ndarray:
    """digamma (order 0) or trigamma (1) for x > 0: recurrence up to 10, then the asymptotic
    series (error under 1e-13)."""
    x = np.asarray(x, dtype=float).copy()
    acc = np.zeros_like(x)
    while (small := x < 10.0).any():
        acc = acc - np.where(small, 1.0 / x if order == 0 else -1.0 / x**2, 0.0)
        x = np.where(small, x + 1.0, x)
    u = 1.0 / (x * x)
    if order == 0:
        tail = u * (1 / 12 - u * (1 / 120 - u * (1 / 252 - u * (1 / 240 - u / 132))))
        return acc + np.log(x) - 0.5 / x - tail
    tail = u / x * (1 / 6 - u * (1 / 30 - u * (1 / 42 - u * (1 / 30 - u * 5 / 66))))
    return acc + 1.0 / x + u / 2 + tail


def digamma(x: np.ndarray) -> np.ndarray:
    return _psi_terms(x, 0)


def trigamma(x: np.ndarray) -> np.ndarray:
    return _psi_terms(x, 1)


def trigamma_inverse(v: np.ndarray) -> np.ndarray:
    """The y > 0 with trigamma(y) = v (v > 0), by bisection on log y (trigamma decreases)."""
    v = np.asarray(v, dtype=float)
    lo, hi = np.full(v.shape, math.log(1e-8)), np.full(v.shape, math.log(1e12))
    for _ in range(80):
        mid = (lo + hi) / 2.0
        high = trigamma(np.exp(mid)) > v  # y too small
        lo, hi = np.where(high, mid, lo), np.where(high, hi, mid)
    return np.exp((lo + hi) / 2.0)


# --- the test --------------------------------------------------------------------------------


def set_aside(logs: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """Which repeats (..., G, N) of one campaign are stalls or flukes: farther from their
    measurement's median than ``SET_ASIDE_SPREADS`` x the shared ``spread`` (...) and than a
    factor ``SET_ASIDE_FACTOR``; none where that would leave under ``MIN_KEPT`` repeats."""
    with np.errstate(all="ignore"):
        centre = np.nanmedian(logs, axis=-1, keepdims=True)
    reach = np.maximum(SET_ASIDE_SPREADS * np.asarray(spread)[..., None, None],
                       math.log(SET_ASIDE_FACTOR))  # fmt: skip
    far = np.abs(logs - centre) > reach
    kept = (~np.isnan(logs) & ~far).sum(axis=-1, keepdims=True)
    return far & (kept >= MIN_KEPT)


def _spread(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each measurement's pooled within-campaign variance and degrees of freedom, and its
    change in mean log rate."""
    n_a, n_b = (~np.isnan(a)).sum(-1), (~np.isnan(b)).sum(-1)
    with np.errstate(all="ignore"):
        mean_a, mean_b = np.nanmean(a, -1), np.nanmean(b, -1)
        ss = np.nansum((a - mean_a[..., None]) ** 2, -1) + np.nansum(
            (b - mean_b[..., None]) ** 2, -1
        )
        d = (n_a + n_b - 2).astype(float)
        s2 = np.where(d > 0, ss / d, np.nan)
    return s2, d, mean_b - mean_a


def prior(s2: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s0^2, d0): the scaled chi-square the measurements' variances (..., G) are drawn from,
    by moments of log s^2 (Smyth 2004, section 6.2; limma's fitFDist). NaN variances are not
    measurements; fewer than ``MIN_FOR_PRIOR`` give d0 = 0 (nothing shared)."""
    ok = ~np.isnan(s2) & (d > 0)
    g = ok.sum(-1)
    floor = 1e-12  # identical repeats: a variance of 0 has no log
    with np.errstate(all="ignore"):
        e = np.where(ok, np.log(np.maximum(s2, floor)) - digamma(np.where(ok, d, 1) / 2)
                     + np.log(np.where(ok, d, 1) / 2), np.nan)  # fmt: skip
        e_mean = np.nanmean(e, -1)
        e_var = np.nansum((e - e_mean[..., None]) ** 2, -1) / (g - 1)
        excess = e_var - np.nanmean(np.where(ok, trigamma(np.where(ok, d, 1) / 2), np.nan), -1)
    e_mean, excess = np.array(e_mean, dtype=float), np.array(excess, dtype=float)
    d0 = np.full(e_mean.shape, np.inf)
    positive = excess > 0
    if positive.any():
        d0[positive] = 2.0 * trigamma_inverse(excess[positive])
    s0_2 = np.array(np.exp(e_mean), dtype=float)
    finite = np.isfinite(d0)
    s0_2[finite] = np.exp(e_mean[finite] + digamma(d0[finite] / 2) - np.log(d0[finite] / 2))
    d0 = np.where(g >= MIN_FOR_PRIOR, d0, 0.0)
    return s0_2, d0


def own_noise(s2: np.ndarray, d: np.ndarray, s0_2: np.ndarray, d0: np.ndarray) -> np.ndarray:
    """Which measurements (..., G) have a spread the pool cannot explain: ``s2 / s0^2`` in the
    ``P_NOISIER`` upper or the ``P_QUIETER`` lower tail of F(d, d0). None where nothing is
    shared (d0 = 0)."""
    with np.errstate(all="ignore"):
        below = f_cdf(s2 / s0_2[..., None], d, np.broadcast_to(d0[..., None], np.shape(s2)))
    shared = np.broadcast_to((d0 > 0)[..., None], np.shape(s2))
    return shared & ~np.isnan(below) & ((1.0 - below < P_NOISIER) | (below < P_QUIETER))


def benjamini_hochberg_cut(p: np.ndarray, rate: float) -> np.ndarray:
    """R (...): how many of the p-values (..., G; NaN: not tested) Benjamini-Hochberg finds
    at false discovery rate ``rate``."""
    m = (~np.isnan(p)).sum(-1)
    ranked = np.sort(np.where(np.isnan(p), np.inf, p), axis=-1)
    k = np.arange(1, p.shape[-1] + 1)
    under = ranked <= rate * k / np.maximum(m, 1)[..., None]
    return np.where(under.any(-1), p.shape[-1] - np.argmax(under[..., ::-1], axis=-1), 0)


def moderated(rates_a: np.ndarray, rates_b: np.ndarray, margin: float, rate: float) -> Moderated:
    """The comparison of B against A (module doc) for rates (..., G, N), NaN-padded."""
    with warnings.catch_warnings():
        # a measurement without values on one side (too few repeats) is expected: numpy's
        # "mean of empty slice" says nothing here
        warnings.simplefilter("ignore", RuntimeWarning)
        return _moderated(rates_a, rates_b, margin, rate)


def _moderated(rates_a: np.ndarray, rates_b: np.ndarray, margin: float, rate: float) -> Moderated:
    la = np.log(np.where(np.asarray(rates_a) > 0, rates_a, np.nan))
    lb = np.log(np.where(np.asarray(rates_b) > 0, rates_b, np.nan))
    measured_a, measured_b = (~np.isnan(la)).sum(-1), (~np.isnan(lb)).sum(-1)
    enough = (measured_a >= MIN_REPEATS) & (measured_b >= MIN_REPEATS)
    # the shared spread for setting stalls aside: the median measurement's own
    s2_raw, _, _ = _spread(la, lb)
    with np.errstate(all="ignore"):
        shared = np.sqrt(np.nanmedian(np.where(enough, s2_raw, np.nan), axis=-1))
    shared = np.where(np.isnan(shared), 0.0, shared)
    out_a, out_b = set_aside(la, shared), set_aside(lb, shared)
    la, lb = np.where(out_a, np.nan, la), np.where(out_b, np.nan, lb)
    # a rate of 0 or less (an ok repeat that moved nothing) has no log: set aside too
    nothing = (np.asarray(rates_a) <= 0).sum(-1) + (np.asarray(rates_b) <= 0).sum(-1)
    aside = out_a.sum(-1) + out_b.sum(-1) + nothing
    n_a, n_b = (~np.isnan(la)).sum(-1), (~np.isnan(lb)).sum(-1)

    s2, d, delta = _spread(la, lb)
    s2, d = np.where(enough, s2, np.nan), np.where(enough, d, 0.0)
    s0_2, d0 = prior(s2, d)
    own = own_noise(s2, d, s0_2, d0)  # these keep their own spread: d0 = 0 for them
    d0g, s0g = np.where(own, 0.0, d0[..., None]), s0_2[..., None]
    with np.errstate(all="ignore"):
        post = np.where(np.isinf(d0g), s0g, (d0g * s0g + d * s2) / (d0g + d))
        post = np.where(d0g == 0, s2, post)
        se = np.sqrt(post * (1.0 / n_a + 1.0 / n_b))
        df = d0g + d
        t_slow = (delta - math.log(1 - margin)) / se
        t_fast = (delta - math.log(1 + margin)) / se
    p_slower = np.where(enough, t_sf(-t_slow, df), np.nan)
    p_faster = np.where(enough, t_sf(t_fast, df), np.nan)

    tested = np.maximum(enough.sum(-1), 1)
    rate_slower, rate_faster = SLOWER_SHARE * rate, (1 - SLOWER_SHARE) * rate
    alpha_s = rate_slower * np.maximum(benjamini_hochberg_cut(p_slower, rate_slower), 1) / tested
    alpha_f = rate_faster * np.maximum(benjamini_hochberg_cut(p_faster, rate_faster), 1) / tested
    shape = df.shape
    up = t_isf(np.broadcast_to(alpha_s[..., None], shape), df)  # the high end: slower's test
    down = t_isf(np.broadcast_to(alpha_f[..., None], shape), df)  # the low end: faster's
    with np.errstate(all="ignore"):
        low, high = np.exp(delta - down * se), np.exp(delta + up * se)
    return Moderated(
        n_a=n_a,
        n_b=n_b,
        set_aside=aside,
        ratio=np.exp(delta),
        p_slower=p_slower,
        p_faster=p_faster,
        low=np.where(enough, low, np.nan),
        high=np.where(enough, high, np.nan),
        level=np.where(enough.any(-1), 1.0 - alpha_s - alpha_f, np.nan),
        slower=p_slower <= alpha_s[..., None],
        faster=p_faster <= alpha_f[..., None],
        prior_df=d0,
        prior_sd=np.sqrt(s0_2),
        own_noise=own,
    )


def padded(groups: list[list[float]]) -> np.ndarray:
    """Lists of rates (one per measurement) as one (G, N) array padded with NaN."""
    width = max((len(g) for g in groups), default=0)
    out = np.full((len(groups), max(width, 1)), np.nan)
    for i, g in enumerate(groups):
        out[i, : len(g)] = g
    return out
