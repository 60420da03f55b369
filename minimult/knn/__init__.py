"""knn-replace's neighbour table: fastText per language (`fasttext`), mapped into one space by
unsupervised VecMap (`vecmap`), then the k nearest ids in the other language (`neighbours`)."""
