// A bare grpc-go server: the ceiling a gRPC server in Go reaches on this machine for the
// KServe v2 ModelInfer call. It does no inference and decodes nothing: every request is
// answered with a response encoded once at start, the one whose size matches the
// request's (see responses), so only gRPC and HTTP/2 work remain.
//
// Usage: ceiling -port N -sizes 256,262144,4194304   (FP32 element counts to answer for)
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
)

// rawCodec hands message bytes through untouched, so the server never decodes protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = data
	return nil
}
func (rawCodec) Name() string { return "proto" }

// Protobuf wire format, by hand: field numbers from the KServe v2 grpc_service.proto.
func tag(field, wireType int) []byte { return binary.AppendUvarint(nil, uint64(field<<3|wireType)) }
func lengthDelimited(field int, payload []byte) []byte {
	out := tag(field, 2)
	out = binary.AppendUvarint(out, uint64(len(payload)))
	return append(out, payload...)
}

// modelInferResponse encodes ModelInferResponse{model_name, outputs[{name, datatype FP32,
// shape [1, n]}], raw_output_contents[n float32s]}.
func modelInferResponse(elements int) []byte {
	shape := binary.AppendUvarint(nil, 1)
	shape = binary.AppendUvarint(shape, uint64(elements))
	output := lengthDelimited(1, []byte("OUTPUT0"))
	output = append(output, lengthDelimited(2, []byte("FP32"))...)
	output = append(output, lengthDelimited(3, shape)...)
	raw := make([]byte, 4*elements)
	for i := 0; i < elements; i++ {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i)))
	}
	response := lengthDelimited(1, []byte("identity_fp32"))
	response = append(response, lengthDelimited(5, output)...)
	return append(response, lengthDelimited(6, raw)...)
}

type sized struct {
	payload  int
	response []byte
}

func main() {
	port := flag.Int("port", 0, "port to listen on (0: any)")
	sizeList := flag.String("sizes", "256", "FP32 element counts of the responses to pre-encode")
	flag.Parse()
	var responses []sized
	for _, field := range strings.Split(*sizeList, ",") {
		elements, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil {
			log.Fatalf("bad -sizes: %v", err)
		}
		responses = append(responses, sized{4 * elements, modelInferResponse(elements)})
	}
	sort.Slice(responses, func(i, j int) bool { return responses[i].payload < responses[j].payload })
	// The largest response whose payload fits in the request: the echo of an identity model.
	pick := func(requestSize int) []byte {
		chosen := responses[0].response
		for _, candidate := range responses {
			if candidate.payload <= requestSize {
				chosen = candidate.response
			}
		}
		return chosen
	}
	encoding.RegisterCodec(rawCodec{})
	server := grpc.NewServer(
		grpc.MaxRecvMsgSize(math.MaxInt32),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			var request []byte
			if err := stream.RecvMsg(&request); err != nil {
				return err
			}
			response := pick(len(request))
			return stream.SendMsg(&response)
		}),
	)
	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening %d\n", listener.Addr().(*net.TCPAddr).Port)
	log.Fatal(server.Serve(listener))
}
