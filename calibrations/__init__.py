"""Offline calibrations behind the statistical tests' trial counts and miss bounds.

The suite's statistical tests play few trials; how few may they play and still catch a fault with a stated miss
probability? Each module here answers that once, offline, with many more trials (or an exact law) than a test can
afford, on other seeds than the tests': the tests' comments quote their numbers. They are not run by CI (minutes
to hours each); run one as ``python -m calibrations.NAME --help`` from the repository root.
"""
