module s3bulk/bench/vectors_sink

go 1.22
