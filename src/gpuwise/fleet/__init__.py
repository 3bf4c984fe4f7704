"""Beyond one server: fleet acceptance, metrics, MIG plans, pipeline and job placement.

Modules: `rules` (data/fleet.toml), `nodes` (evidence files -> judged nodes), `judge`
(fleet-relative outliers), `html` (the report page), `prometheus` (text exposition),
`mig`/`mig_data` (MIG slicing plans), `place` (pipelines onto GPUs), `jobs`/`ray_run`
(declared-memory jobs and verify on Ray). Nothing here imports ray or prometheus_client
at module level.
"""
