"""The one way curate runs a model: `ServerOptions` (which model, which server, how it is started) and the job
runner that drives datatrove's InferenceRunner into a folder (server.py, job.py)."""
