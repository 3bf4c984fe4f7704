"""Beyond one server: fleet acceptance, metrics, MIG plans, pipeline and job placement.

Modules: `rules` (data/fleet.toml), `nodes` (evidence files -> judged nodes), `judge`
(fleet-relative outliers), `api`, `html`, `words` (the report), `prometheus` and `exporter`
(text exposition, HTTP), `mig_data`/`mig_fit`/`mig`/`mig_input` (MIG slicing plans),
`place_input`/`place_stage`/`place`/`place_out` (pipelines onto GPUs), `jobs`, `inventory`,
`ray_conn`/`ray_verify`/`ray_jobs` (declared-memory jobs and verify on Ray). Nothing here
imports ray or prometheus_client at module level.
"""
