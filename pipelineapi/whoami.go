package pipelineapi

import (
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// whoami answers GET /v1/pipeline: the verified key, its record key and
// the node's clock. It changes nothing; `archivebot bridge` asks it when
// it starts, to say at once when its key is unknown or revoked, the
// address is not the API, or the clocks differ.
func (s *Server) whoami(req *request) any {
	return wire.WhoAmI{Key: req.key, ID: store.APIPipelineKey(req.key), NodeTime: s.opt.Now().UnixMilli()}
}
