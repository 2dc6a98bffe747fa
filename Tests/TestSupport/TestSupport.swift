// Helpers shared by the test targets.
