"""relmerge inside other frameworks' pipelines. Each integration needs its extra
(``pip install 'relmerge[heta]'``) and is imported on its own; ``import relmerge`` never
imports them."""
