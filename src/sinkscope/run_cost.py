"""The cost of a run: wall time, CPU time and peak memory per rule, from Snakemake's benchmark
files (`logs/benchmark/<rule>/<job>.tsv`, one per job, rewritten by each run of that job), and
the jobs' start-up, from the `<log>.startup` file `jobs.start` writes beside each job's log;
then the same job-minutes attributed to the scorecard's claims they feed, summed by verdict."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .jobs import STARTUP_SUFFIX
from .models.sources import NULL_SUFFIX

COLUMNS = ["rule", "jobs", "wall_min", "cpu_min", "max_rss_mb"]
SUMMARY_ROWS = ("start-up", "job total", "total")  # after the rules'
NO_CLAIM = "feeds no claim"  # the by-verdict row of jobs upstream of no claim (atlas, scorecard)


def read_benchmarks(folder: str | Path) -> pd.DataFrame:
    """One row per job: rule, job, wall seconds, CPU seconds, peak RSS (MB), finish time."""
    rows = []
    for path in sorted(Path(folder).glob("*/*.tsv")):
        found = pd.read_csv(path, sep="\t")
        if found.empty:
            continue
        last = found.iloc[-1]
        rows.append(
            {
                "rule": path.parent.name,
                "job": path.stem,
                "wall_s": float(last["s"]),
                "cpu_s": float(last["cpu_time"]),
                "max_rss_mb": float(pd.to_numeric(last["max_rss"], errors="coerce")),
                "finished": path.stat().st_mtime,
            }
        )
    return pd.DataFrame(rows, columns=["rule", "job", "wall_s", "cpu_s", "max_rss_mb", "finished"])


def read_startups(folder: str | Path, skip: str | Path | None = None) -> list[float]:
    """The start-up seconds of every job that logged one under `folder` (its process start to
    its first step: interpreter and imports), but the job whose log is `skip`; an unreadable
    file is skipped."""
    found = []
    left_out = None if skip is None else Path(f"{skip}{STARTUP_SUFFIX}").resolve()
    for path in sorted(Path(folder).rglob(f"*{STARTUP_SUFFIX}")):
        if path.resolve() == left_out:
            continue
        try:
            found.append(float(path.read_text()))
        except (OSError, ValueError):
            continue
    return found


def summarise(jobs: pd.DataFrame, startups: list[float] | None = None) -> pd.DataFrame:
    """Per rule (most wall time first): jobs, summed wall and CPU minutes, largest peak RSS;
    then, with `startups`, a `start-up` row (the jobs that logged one and their summed start-up
    minutes), a `job total` row (the sums) and a `total` row whose wall time is the span from
    the first job's start to the last job's end (the run's wall time when every job ran in one
    run)."""
    per_rule = (
        jobs.groupby("rule")
        .agg(
            jobs=("job", "size"),
            wall_min=("wall_s", "sum"),
            cpu_min=("cpu_s", "sum"),
            max_rss_mb=("max_rss_mb", "max"),
        )
        .assign(wall_min=lambda t: t.wall_min / 60, cpu_min=lambda t: t.cpu_min / 60)
        .sort_values("wall_min", ascending=False)
        .reset_index()
    )
    span = (jobs.finished.max() - (jobs.finished - jobs.wall_s).min()) / 60 if len(jobs) else 0.0
    startups = startups or []
    totals = pd.DataFrame(
        [
            ["start-up", len(startups), sum(startups) / 60, float("nan"), float("nan")],
            [
                "job total",
                len(jobs),
                jobs.wall_s.sum() / 60,
                jobs.cpu_s.sum() / 60,
                jobs.max_rss_mb.max(),
            ],
            ["total", len(jobs), span, jobs.cpu_s.sum() / 60, jobs.max_rss_mb.max()],
        ],
        columns=COLUMNS,
    )
    totals = totals if startups else totals.iloc[1:]
    return pd.concat([per_rule[COLUMNS], totals], ignore_index=True).round(3)


def figure(summary: pd.DataFrame, scale: str, top: int = 15):
    """Wall and CPU minutes of the `top` costliest rules, the others summed in one bar."""
    from . import plotting  # here, not at the top: the workflow imports this module to plan

    rules = summary[~summary.rule.isin(SUMMARY_ROWS)]
    if len(rules) > top:
        rest = rules.iloc[top:]
        other = {"rule": f"{len(rest)} other rules", "jobs": rest.jobs.sum()}
        other |= {"wall_min": rest.wall_min.sum(), "cpu_min": rest.cpu_min.sum()}
        rules = pd.concat([rules.iloc[:top], pd.DataFrame([other])], ignore_index=True)
    rules = rules.iloc[::-1]
    labels = [f"{rule} ({int(jobs)})" for rule, jobs in zip(rules.rule, rules.jobs, strict=True)]
    fig, axes = plotting.figure(ncols=2, width=4.5, height=0.3 * len(rules) + 1.2, sharey=True)
    for ax, column, label in zip(axes, ("wall_min", "cpu_min"), ("wall", "CPU"), strict=True):
        ax.barh(labels, rules[column])
        ax.set(xlabel=f"{label} minutes, summed over the rule's jobs")
    axes[0].set(ylabel="rule (jobs)")
    total = summary.set_index("rule")
    fig.suptitle(
        f"Run cost ({scale} scale): {total.loc['total', 'wall_min']:.1f} min wall, "
        f"{total.loc['job total', 'wall_min']:.1f} job-minutes, "
        f"{int(total.loc['total', 'jobs'])} jobs"
    )
    return fig


def job_key(rule: str, job: str) -> str:
    """A benchmarked job's name in the lineage: `<rule>/<job>`, its benchmark file's path under
    `logs/benchmark/` without the suffix."""
    return f"{rule}/{job}"


def is_null_job(key: str) -> bool:
    """Whether the job `key` serves a claim's null alone: its job name holds a null model's name
    (`<model>@init`), as every job that builds or reads a null does."""
    return NULL_SUFFIX in key.split("/", 1)[1]


def _job_minutes(jobs: pd.DataFrame) -> pd.Series:
    """Each benchmarked job's wall minutes, indexed by `job_key`."""
    keys = [job_key(r, j) for r, j in zip(jobs.rule, jobs.job, strict=True)]
    return pd.Series(jobs.wall_s.to_numpy() / 60, index=keys)


def _fed(minutes: pd.Series, feeds: dict[str, list[str]], exhibits) -> pd.DataFrame:
    """(exhibit, key) for each benchmarked job upstream of an exhibit among `exhibits`."""
    fed = pd.DataFrame(
        [(exhibit, key) for exhibit, keys in feeds.items() for key in keys if key in minutes.index],
        columns=["exhibit", "key"],
    )
    return fed[fed.exhibit.isin(exhibits)]


def claim_cost(jobs: pd.DataFrame, feeds: dict[str, list[str]], card: pd.DataFrame) -> pd.DataFrame:
    """Each claim of the scorecard `card` (exhibit, claim_id, kind, verdict) with the job-minutes
    that fed it. `feeds` lists, per exhibit, the jobs (`job_key`) upstream of its tables, claims
    and figure; a job's wall minutes are split evenly among the claims of every exhibit it feeds
    (an extraction read by five exhibits of ten claims gives each claim a tenth). Columns: the
    card's, `jobs` (how many jobs fed the claim), `job_min` and `share` (of the run's
    job-minutes), and `null_min`: the part of `job_min` from the jobs that serve nulls alone
    (`is_null_job`), what the claim's null costs beyond the jobs the claim needs anyway (a null
    computed inside such a job, as the toys' untrained heads are, is not counted apart)."""
    claims = card[["exhibit", "claim_id", "kind", "verdict"]].reset_index(drop=True)
    per_exhibit = claims.groupby("exhibit").size()
    minutes = _job_minutes(jobs)
    fed = _fed(minutes, feeds, per_exhibit.index)
    claims_fed = fed.exhibit.map(per_exhibit).groupby(fed.key).transform("sum")
    fed = fed.assign(per_claim=fed.key.map(minutes) / claims_fed)
    fed = fed.assign(per_null=fed.per_claim.where(fed.key.map(is_null_job), 0.0))
    cost = fed.groupby("exhibit").agg(
        jobs=("key", "size"), job_min=("per_claim", "sum"), null_min=("per_null", "sum")
    )
    found = claims.join(cost, on="exhibit").fillna({"jobs": 0, "job_min": 0.0, "null_min": 0.0})
    total = minutes.sum()
    return found.assign(
        jobs=found.jobs.astype(int),
        share=found.job_min / total if total else 0.0,
    ).round({"job_min": 3, "null_min": 3, "share": 4})


def sole_cost(jobs: pd.DataFrame, feeds: dict[str, list[str]], card: pd.DataFrame) -> pd.Series:
    """Per verdict of the scorecard `card`, the job-minutes of the jobs whose claims all have that
    verdict: what the run would save without the rows of that verdict (a job that also feeds a
    row of another verdict is counted under none)."""
    minutes = _job_minutes(jobs)
    fed = _fed(minutes, feeds, card.exhibit.unique()).merge(card[["exhibit", "verdict"]])
    served = fed.groupby("key").verdict.unique()
    sole = served[served.map(len) == 1].map(lambda verdicts: verdicts[0])
    return minutes[sole.index].groupby(sole).sum()


def cost_by_verdict(per_claim: pd.DataFrame, jobs: pd.DataFrame, sole: pd.Series) -> pd.DataFrame:
    """The job-minutes of `claim_cost` summed per verdict (most first: claims, replications
    among them, job-minutes, share of the run; `sole_min` and `sole_share`, the same of
    `sole_cost`: the jobs that feed rows of this verdict alone), then `NO_CLAIM` (the minutes no
    claim was fed by) and `job total` (no sole minutes)."""
    total = jobs.wall_s.sum() / 60
    states = (
        per_claim.groupby("verdict", sort=False)
        .agg(
            claims=("claim_id", "size"),
            replications=("kind", lambda kind: int((kind == "replication").sum())),
            job_min=("job_min", "sum"),
        )
        .sort_values("job_min", ascending=False, kind="stable")
        .reset_index()
    )
    attributed = states.job_min.sum()
    rest = pd.DataFrame(
        [[NO_CLAIM, 0, 0, total - attributed], ["job total", len(per_claim), 0, total]],
        columns=states.columns,
    )
    rest.loc[1, "replications"] = states.replications.sum()
    found = pd.concat([states, rest], ignore_index=True)
    sole_min = found.verdict.map(sole).fillna(0.0).where(found.verdict != "job total")
    sole_min = sole_min.where(found.verdict != NO_CLAIM, found.job_min)
    return found.assign(
        share=found.job_min / total if total else 0.0,
        sole_min=sole_min,
        sole_share=sole_min / total if total else 0.0,
    ).round({"job_min": 3, "share": 4, "sole_min": 3, "sole_share": 4})
