//! Tests of the dataset_config module.
