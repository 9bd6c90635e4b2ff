"""The moderated t-test's parts (cloudbench.report.moderated) against what is known of them
exactly: the t distribution's closed forms, the gamma family's identities, and a prior fitted
to variances drawn from it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cloudbench.report import moderated as m

pytestmark = pytest.mark.unit

T = np.linspace(-6.0, 9.0, 31)


def test_the_t_tail_is_its_closed_form_at_1_and_2_degrees_and_the_normal_beyond():
    """Student's t at 1 degree is Cauchy's, at 2 has a closed tail; at NORMAL_DF and beyond
    it is the normal (erfc)."""
    cauchy = 0.5 - np.arctan(T) / math.pi
    two = 0.5 - T / (2 * np.sqrt(T * T + 2))
    normal = np.array([0.5 * math.erfc(t / math.sqrt(2)) for t in T])
    assert m.t_sf(T, 1.0) == pytest.approx(cauchy, rel=1e-10, abs=1e-14)
    assert m.t_sf(T, 2.0) == pytest.approx(two, rel=1e-10, abs=1e-14)
    assert m.t_sf(T, np.inf) == pytest.approx(normal, rel=1e-12)
    # just below the switch to the normal, the t differs from it by under half a percent
    near = m.t_sf(np.array([3.5]), m.NORMAL_DF)[0]
    assert near == pytest.approx(0.5 * math.erfc(3.5 / math.sqrt(2)), rel=5e-3)


def test_the_t_quantile_inverts_the_tail_and_the_density_is_its_slope():
    p = np.array([1e-5, 1e-3, 0.0021, 0.025, 0.3])
    for df in (1.0, 3.5, 10.0, 240.0, np.inf):
        t = m.t_isf(p, df)
        assert m.t_sf(t, df) == pytest.approx(p, rel=1e-9)
        h = 1e-5
        slope = (m.t_sf(t - h, df) - m.t_sf(t + h, df)) / (2 * h)
        assert m.t_pdf(t, df) == pytest.approx(slope, rel=1e-5)


def test_the_gamma_family_meets_its_identities():
    x = np.array([0.3, 0.5, 1.0, 2.5, 7.9, 8.0, 31.0, 1e4])
    assert m._lgamma(x) == pytest.approx([math.lgamma(v) for v in x], abs=1e-10)
    assert m.digamma(np.array([1.0]))[0] == pytest.approx(-0.5772156649015329, rel=1e-12)
    assert m.digamma(x + 1) - m.digamma(x) == pytest.approx(1 / x, rel=1e-10)
    assert m.trigamma(np.array([1.0]))[0] == pytest.approx(math.pi**2 / 6, rel=1e-12)
    assert m.trigamma_inverse(m.trigamma(x)) == pytest.approx(x, rel=1e-8)


def test_the_prior_recovers_the_variances_it_was_drawn_from():
    """Variances of 2000 measurements drawn as s0^2 chi2(d)/d around per-measurement variances
    from the prior (d0 = 8, s0 = 0.1) give back s0 and d0; one noise for all gives d0 large
    (infinite or in the thousands); fewer than MIN_FOR_PRIOR measurements share nothing."""
    rng = np.random.default_rng(3)
    g, d, d0, s0 = 2000, 10.0, 8.0, 0.1
    sigma2 = s0**2 * d0 / rng.chisquare(d0, g)  # scaled inverse chi-square: the prior
    s2 = sigma2 * rng.chisquare(d, g) / d
    fit_s0_2, fit_d0 = m.prior(s2, np.full(g, d))
    assert math.sqrt(fit_s0_2) == pytest.approx(s0, rel=0.05)
    assert fit_d0 == pytest.approx(d0, rel=0.25)
    same = s0**2 * rng.chisquare(d, g) / d
    assert m.prior(same, np.full(g, d))[1] > 200
    assert m.prior(same[:2], np.full(2, d))[1] == 0


def test_benjamini_hochberg_counts_what_it_finds():
    p = np.array([[0.001, 0.008, 0.039, 0.041, 0.9], [0.2, 0.3, np.nan, 0.5, 0.6]])
    # 0.041 <= 0.05 x 4/5 = 0.04? no; 0.039 <= 0.03? no; 0.008 <= 0.02: two found
    assert m.benjamini_hochberg_cut(p, 0.05).tolist() == [2, 0]


def test_the_f_distribution_is_its_closed_form_at_2_and_2_degrees_and_chi_square_beyond():
    """F(2, 2) has P(F <= f) = f / (1 + f); with infinite denominator degrees it is
    chi-square(2) / 2, whose P is 1 - exp(-f)."""
    f = np.array([0.01, 0.1, 0.5, 1.0, 3.0, 40.0])
    assert m.f_cdf(f, 2.0, 2.0) == pytest.approx(f / (1 + f), rel=1e-10)
    assert m.f_cdf(f, 2.0, np.inf) == pytest.approx(1 - np.exp(-f), abs=1e-4)
    assert np.isnan(m.f_cdf(np.array([np.nan]), 2.0, 2.0)).all()


def test_a_route_whose_spread_the_pool_cannot_explain_keeps_its_own():
    """24 routes at 6 repeats (10 degrees each): one 4 times quieter than 23 others keeps its
    own spread (own_noise) in most draws (88%: the lower tail is the strict one), one 4 times
    noisier in nearly all (99.8%), the 23 alike never; with one noise for all, about
    P_NOISIER + P_QUIETER of the routes do (0.4%: those in the pool's own tails)."""
    rng = np.random.default_rng(8)
    d = np.full((500, 24), 10.0)
    for odd in (0.25, 4.0):
        sd = np.array([0.2 * odd] + [0.2] * 23)
        s2 = sd**2 * rng.chisquare(10, (500, 24)) / 10
        s0_2, d0 = m.prior(s2, d)
        own = m.own_noise(s2, d, s0_2, d0)
        assert own[:, 0].mean() > (0.8 if odd < 1 else 0.95), odd
        assert own[:, 1:].mean() < 0.01, odd
    same = 0.1**2 * rng.chisquare(10, (500, 24)) / 10
    share = m.own_noise(same, d, *m.prior(same, d)).mean()
    assert share < 3 * (m.P_NOISIER + m.P_QUIETER), share
