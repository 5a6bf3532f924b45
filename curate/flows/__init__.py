"""Prefect flows, one per job (tag, build, cpt, priming, multihop, mcqa, export, publish) plus `curate_pipeline`
chaining tag -> build -> publish; no data logic here.

Each flow validates its pydantic parameters before it starts and wraps one pipeline call in a task
whose result is persisted under a key made from the inputs, the classifier and the configuration.
The parameters are those of the matching command, executor and cleaning options included.
Deployments live in prefect.yaml at the project root (`curate serve`, `curate deploy`).
"""
