"""What a site does around its measurements: preflight, latency probes, the exchange of results
through the remote, status, launching, and the job environment.
"""
