"""Continued-pretraining corpora: behavior-enriched vs behavior-minimized text at a matched token budget.

    tags --DuckDB--> candidate pools (seeded random order, no id in both, one copy of a repeated id: query.py)
    corpus --datatrove--> pool texts + token counts by the named tokenizer  [--dedup / --decontam on the pool]
    [--require-solution]  problem and worked solution? cue rule, or the is_solution prompt (InferenceRunner)
    pools --match--> enriched (>= k chosen behaviors) and minimized (none), same token total (within the
                     tolerance), same length distribution (stratified on token-length bins x domain; KS reported)
    [--rewrite]  InferenceRunner: each document -> <question>/<thoughts>/<answer>; unparseable rewrites dropped,
                 counted and kept in rejects with the raw output; the set plus more of its pool is rewritten, in
                 rounds, so that both rewritten sets are matched at the budget again
    exports      CPT text (parquet + jsonl), SFT {query, completion} for rewrites, token-packed sequences

Layout:
    OUT/enriched/, OUT/minimized/                  data/train-00000.parquet, README.md card, length plot
    OUT/enriched_rewrite/, OUT/minimized_rewrite/  with --rewrite: id (source id), question, thoughts, answer,
                                                   completion, text; rejects/rewrite.jsonl
    OUT/exports/<dataset>/{cpt,cpt_jsonl,sft,packed}/
    OUT/rejects/                                   unreadable corpus records, duplicate ids, duplicates,
                                                   contaminated rows
    OUT/.curate/                                   pools, parameters, matching report (cpt.json), logs, the LLM jobs
                                                   (solution/, rewrite/round-N/)

The pass over the corpus (token counting) and the rewrite run on any executor (executors.py). On Slurm the
command submits the job and returns; the same command run again once it is done carries on from there: the
pool folder (OUT/.curate/pool) and the rewrite folder are kept while their inputs and parameters are unchanged.
--dedup and --decontam of the pool run on this machine: the pool is at most --oversample times the budget.

Modules, in the order a build runs them:
    common     the two variants, CPTError, the token budget and the tokenizer
    selection  the selection rule (CPTSelection) and the candidate pools drawn from the attribute shards
    pool       the corpus pass: pool texts and token counts, --dedup / --decontam of the pool
    judge      --require-solution: the cue rule or the is_solution LLM judge
    matching   the length-matching program (match_pools) and its report
    llm_jobs   what the rewrite and the judge share: document options, one request, the job's run
    rewrite    the LLM rewrite in rounds and the re-match of both rewritten sets
    packing    the exports: CPT text, SFT rows, token-packed sequences
    card       the dataset cards and the reproducing command
    run        cpt_options (the job's options checked), run_cpt (the build), cpt (the claimed build)
"""
