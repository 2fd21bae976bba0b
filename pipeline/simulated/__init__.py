"""SIMULATIONS for load tests only (``tools/simulate_night.py``): a synthetic object store and an
engine that sleeps for what a device would take. Never a default: a stage uses them only when
told so (``callqa router --simulated-storage``, ``callqa worker --engine simulated:rtfx=R``)."""
