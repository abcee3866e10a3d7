# exhibits: the table, claims and figure rules of every exhibit, and the training rule of each
# trained toy (one job per run), generated from the registry (sinkscope.exhibits.registry). Each
# job receives exactly the settings its function reads and the version of the code it runs, so a
# change reruns only what it affects.

for exhibit in EXHIBITS.values():
    tables = exhibit.table_paths()
    category = f"{exhibit.paper} ({exhibit.id[0]})"
    threads = exhibit.threads if isinstance(exhibit.threads, int) else PLAN.get(exhibit.threads)

    if exhibit.run_tables:

        rule:
            name:
                f"train_{exhibit.id}"
            output:
                **exhibit.run_paths("{run}"),
            params:
                exhibit=exhibit.id,
                run=run_settings(exhibit),
                settings=exhibit.settings(PLAN, "train"),
                code=code_of("exhibit_train.py", exhibit.module),
            wildcard_constraints:
                run="[^/]+",
            threads: threads
            priority: exhibit.runtime  # the longest first: on few cores a long job started last is the run's tail
            log:
                f"logs/{exhibit.id}/runs/{{run}}.log",
            benchmark:
                f"logs/benchmark/train_{exhibit.id}/{{run}}.tsv"
            resources:
                mem_mb=exhibit.mem_mb,
                runtime=exhibit.runtime,
            conda:
                ENV
            script:
                "../scripts/exhibit_train.py"

    rule:
        name:
            f"tables_{exhibit.id}"
        input:
            **exhibit.inputs(PLAN),
        output:
            **tables,
        params:
            exhibit=exhibit.id,
            settings=exhibit.settings(PLAN, "tables"),
            code=code_of("exhibit_tables.py", exhibit.module),
        threads: 1 if exhibit.run_tables else threads  # a trained toy's tables gather its runs
        priority: exhibit.runtime  # the longest first: on few cores a long job started last is the run's tail
        log:
            f"logs/{exhibit.id}/tables.log",
        benchmark:
            f"logs/benchmark/tables_{exhibit.id}/all.tsv"
        resources:
            mem_mb=exhibit.mem_mb,
            runtime=exhibit.runtime,
        conda:
            ENV
        script:
            "../scripts/exhibit_tables.py"

    if exhibit.id in CLAIMED:  # otherwise the scorecard says why its claims are not run

        rule:
            name:
                f"claims_{exhibit.id}"
            input:
                **tables,
            output:
                claims_file(exhibit.id),
            params:
                exhibit=exhibit.id,
                settings=exhibit.settings(PLAN, "claims"),
                code=code_of("exhibit_claims.py", exhibit.module),
            log:
                f"logs/{exhibit.id}/claims.log",
            benchmark:
                f"logs/benchmark/claims_{exhibit.id}/all.tsv"
            resources:
                mem_mb=2000,
                runtime=5,
            conda:
                ENV
            script:
                "../scripts/exhibit_claims.py"

    rule:
        name:
            f"figure_{exhibit.id}"
        input:
            **tables,
            **({"claims": claims_file(exhibit.id)} if exhibit.id in CLAIMED else {}),
        output:
            png=report(
                f"figures/{exhibit.id}.png",
                caption=f"../report/{exhibit.id}.rst",
                category=category,
                labels={"exhibit": exhibit.id},
            ),
            pdf=f"figures/{exhibit.id}.pdf",
        params:
            exhibit=exhibit.id,
            settings=exhibit.settings(PLAN, "figure"),
            code=code_of("exhibit_figure.py", exhibit.module),
        log:
            f"logs/{exhibit.id}/figure.log",
        benchmark:
            f"logs/benchmark/figure_{exhibit.id}/all.tsv"
        resources:
            mem_mb=2000,
            runtime=5,
        conda:
            ENV
        script:
            "../scripts/exhibit_figure.py"
