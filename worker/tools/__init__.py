"""Tools around the engine: eval, bench, show, samples, training, batch research algorithms, soak, test broker."""
