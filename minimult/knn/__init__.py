"""knn-replace's neighbour table: fastText per language (`fasttext`), mapped into one space by
VecMap (`vecmap`; unsupervised unless `knn.seed_dictionary`), then the k nearest ids in each other language
(`neighbours`)."""
