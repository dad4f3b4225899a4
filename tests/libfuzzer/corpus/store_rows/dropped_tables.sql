DROP TABLE kernels;
ALTER TABLE accuracy RENAME TO accuracy_old;
CREATE TABLE accuracy(x);
DELETE FROM schema_version;
