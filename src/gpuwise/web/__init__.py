"""The web page and JSON API behind `gpuwise serve` (needs the `[web]` extra).

Import `gpuwise.web.app.create_app` only where FastAPI is wanted; this package's own
`__init__` imports nothing, so `import gpuwise` never pulls in a web framework.
"""
