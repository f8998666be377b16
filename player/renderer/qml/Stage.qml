// The screen: one Qt Quick scene (the window clears it to black), turned as configured. Its
// layers are those of one region (Region.qml) that fills it; the region's layer stack
// (layerstack.py) decides which layer is in front and fades it in.
//
// On a video wall ([screen] wall, player/wall.py) `content` is the whole wall, laid out at the
// wall's size and moved so that this panel shows its tile; the panel (`panel`) clips it. The
// idle cover and the idle page are this display's own: laid over this panel's tile only (still
// in `content`, so that every layer is a sibling of the others and z alone says which is in
// front).
import QtQuick

Item {
    id: stage

    // The region, for Python to take its layers and hand it its layer stack.
    readonly property Item region: content

    // Clockwise rotation of the content on the panel: 0, 90, 180 or 270.
    property int turn: 0
    readonly property bool sideways: turn === 90 || turn === 270

    // The wall this panel is a tile of (1 x 1: no wall), and the gap between two panels'
    // pictures as a fraction of a panel's width (the same pixels between rows).
    property int wallColumns: 1
    property int wallRows: 1
    property int wallColumn: 0
    property int wallRow: 0
    property real wallBezel: 0.0

    Item {
        id: panel
        objectName: "panel"
        anchors.centerIn: parent
        width: stage.sideways ? stage.height : stage.width
        height: stage.sideways ? stage.width : stage.height
        rotation: stage.turn
        clip: stage.wallColumns > 1 || stage.wallRows > 1

        Region {
            id: content
            readonly property real gap: stage.wallBezel * panel.width
            tile: Qt.rect(-x, -y, panel.width, panel.height)
            x: -stage.wallColumn * (panel.width + gap)
            y: -stage.wallRow * (panel.height + gap)
            width: stage.wallColumns * panel.width + (stage.wallColumns - 1) * gap
            height: stage.wallRows * panel.height + (stage.wallRows - 1) * gap
        }
    }
}
