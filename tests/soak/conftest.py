def pytest_addoption(parser):
    parser.addoption("--soak-seconds", type=float, default=60.0, help="how long the soak test runs (make soak: 600)")
