"""Prefect flows, one per job (tag, build, publish) plus `curate_pipeline` chaining them; no data logic here.

Each flow validates its pydantic parameters before it starts and wraps one pipeline call in a task
whose result is persisted under a key made from the inputs, the classifier and the configuration.
Deployments live in prefect.yaml at the project root (`curate serve`, `curate deploy`).
"""
