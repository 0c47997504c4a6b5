module github.com/kubeplug/kubeplug

go 1.26.8
