"""Where failures lie: a site, a store, or single measurements.

Network monitoring grids read failures by their shape: a whole row of sources failing is
the source, a whole column of destinations is the destination. A campaign's transfers
form the same grid, sites against remotes; this module says which shape its failures
have, and counts those next to an outage of the store (column ``outage``, written by
site.breaker), so a researcher does not read a store's outage as a site's slowness or a
site's broken setup as the store's.
"""

from __future__ import annotations

import pandas as pd

from cloudbench.campaign.identity import LINK

DURING, AFTER = "during", "after"  # site.breaker's words in the outage column


SHOWN = 6  # measurements named one by one in a sentence, at most


def _recovered(rows: pd.DataFrame) -> list[str]:
    """The measurements that were first to reach the store after an outage, each named with
    the outage it followed (site, store, since when)."""
    if rows.empty:
        return []
    names = [
        f"{r.site} {r.direction} {r.remote} {r.layout} {getattr(r, 'setting', '')} r{r.repeat}"
        f" (store down since {str(getattr(r, 'outage_since', '?'))[:19]})"
        for r in rows.head(SHOWN).itertuples()
    ]
    more = f" and {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
    return [
        f"{len(rows)} measurement(s) were the first to reach the store again after an "
        f"outage (column outage: after), so their rates may carry its recovery: "
        f"{'; '.join(names)}{more}."
    ]


def scope_sentences(transfers: pd.DataFrame) -> list[str]:
    """One sentence per failed store (a whole column), failed site (a whole row), one for
    the rest, and one for the measurements right after an outage; none when all is well."""
    if transfers.empty or "status" not in transfers:
        return []
    failed = transfers["status"] == "failed"
    outage = transfers.get("outage", pd.Series(index=transfers.index, dtype=object))
    recovered = _recovered(transfers[outage == AFTER])
    if not failed.any():
        return recovered
    grid = transfers.assign(failed=failed).groupby(LINK)["failed"].all()
    sites = sorted(transfers["site"].unique())
    remotes = sorted(transfers["remote"].unique())
    stores = [r for r in remotes if grid.xs(r, level="remote").all()]
    bad_sites = [s for s in sites if grid.xs(s, level="site").all()]
    out = []
    for r in stores:
        mine = transfers["remote"] == r
        during = int((mine & (outage == DURING)).sum())
        why = f"; {during} of them while it did not answer (outage: during)" if during else ""
        whole = "every site's" if len(sites) > 1 else "every"
        out.append(
            f"Store {r}: {whole} measurement of it failed, a whole column of the grid: the "
            f"store, not a site{why}."
        )
    for s in bad_sites:
        if len(remotes) > 1 or not stores:
            out.append(
                f"Site {s}: every one of its measurements failed, across "
                f"{'every remote' if len(remotes) > 1 else 'its remote'}: a whole row of the "
                "grid, the site (its setup, network or scheduler), not the store."
            )
    covered = transfers["remote"].isin(stores) | transfers["site"].isin(bad_sites)
    single = failed & ~covered
    if single.any():
        during = int((single & (outage == DURING)).sum())
        out.append(
            f"{int(single.sum())} other failed measurement(s) stand alone (their errors are in "
            "transfers.tsv)"
            + (
                f"; {during} failed while the store did not answer (outage: during)"
                if during
                else ""
            )
            + "."
        )
    return out + recovered
