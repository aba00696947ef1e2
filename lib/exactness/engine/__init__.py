"""The one engine for every discrete choice: a check's rows (`rows`: margins, outputs, seeds), each output compared
against the other side and the float64 reference (`outputs`), a decision's margins (`margins`), the verdict that
names a cause only with its proof (`verdicts`, into typed `evidence`), where a defect starts (`places`), and their
words (`verdict_words`, `place_words`). A study
brings its screen and its check for a family of models (discrete_ops: any graph under the dispatch recorder;
near_tie: the wav2vec2 quantizer's replayed draws and graph pool) and hands the rows here."""
