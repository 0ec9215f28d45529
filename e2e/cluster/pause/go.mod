module dynamo-kserve.dev/cluster/pause

go 1.22
