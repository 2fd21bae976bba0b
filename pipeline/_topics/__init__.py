"""Package data: a copy of the repository's topics/ (catalog + event schemas), shipped in the wheel.

A regular package so that importlib.resources hands back real paths. Do not edit the data here:
edit topics/ and copy it over (tests/unit/test_package_data.py fails until both are equal).
"""
