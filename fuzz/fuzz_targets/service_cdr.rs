//! The rosbag2-named services' requests and replies as any peer on the
//! graph can send them (`edgerec_ros::services`): the first byte picks the
//! service, the rest is the sample. Arbitrary bytes give a request or an
//! error, never a panic; what parses writes back to bytes that parse to
//! the same request or reply.
#![no_main]

use edgerec_ros::services::{
    encode_request, encode_response, parse_request, parse_response, ServiceKind,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, sample)) = data.split_first() else {
        return;
    };
    let kind = ServiceKind::ALL[usize::from(pick) % ServiceKind::ALL.len()];
    if let Ok(request) = parse_request(kind, sample) {
        let again = parse_request(kind, &encode_request(kind, request.header))
            .expect("an encoded request parses");
        assert_eq!(again, request);
    }
    if let Ok((header, response)) = parse_response(kind, sample) {
        let bytes = encode_response(kind, header, &response).expect("a parsed reply encodes");
        let again = parse_response(kind, &bytes).expect("an encoded reply parses");
        assert_eq!(again, (header, response));
    }
});
