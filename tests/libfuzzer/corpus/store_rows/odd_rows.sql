INSERT INTO runs(id, started_at, status) VALUES(-1, 'not a time', NULL);
INSERT INTO results(id, run_id, suite, model, backend, mode, batch_size, status, error) VALUES(7, 99, 's', 'm', 'codegen', 'performance', -5, 'nonsense', NULL);
UPDATE results SET median_ms = 'fast', samples = X'0102', speedup = 'nan' WHERE id = 3;
INSERT INTO accuracy(result_id, output_index, dtype) VALUES(3, -1, 'f99');
INSERT INTO kernels(result_id, name, calls) VALUES(3, NULL, -9223372036854775808);
UPDATE schema_version SET version = 9;
