"""What a campaign is: its file's schema, the model checked against it, sizes, the paths of
every record and log, the specs jobs get, and which values are secrets.
"""
