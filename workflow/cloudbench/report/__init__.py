"""From records to the report: statistics and intervals, one module per section, and the kit of
figures and tables they share.
"""
