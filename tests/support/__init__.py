"""What the tests share that is not a fixture: local servers, recordings, kernels, drivers for tests."""
