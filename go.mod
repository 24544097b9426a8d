module github.com/macake/macake

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/fsnotify/fsnotify v1.10.1
	github.com/hashicorp/go-multierror v1.1.1
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)

require github.com/hashicorp/errwrap v1.0.0 // indirect
