"""See and check the labels on your own corpus: a stratified review sample and its page (`curate review`), precision
and recall with intervals weighted back to the corpus (`curate calibrate`), and n-gram heads refit on the user's
labels (`curate adapt`). docs/review.md is the user's guide."""
