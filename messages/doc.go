// Package messages holds the protobuf definitions (*.proto) and the generated
// Go types of everything that crosses the wire between IDN nodes: inference
// requests and replies, forwards, serving-cost announcements, INFIDA control
// messages, topology/catalog payloads and Raft FSM commands.
//
// The generated *.pb.go files are committed. To regenerate them after editing
// a .proto file run:
//
//	go generate ./messages
//
// which installs protoc (Debian protobuf-compiler) when it is missing and uses
// the protoc-gen-go version pinned as a Go tool in go.mod.
package messages

//go:generate bash ./generate.sh
